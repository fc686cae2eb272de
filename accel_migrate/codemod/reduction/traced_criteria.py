"""A criterion handed in as a parameter, or chosen among several in branches,
one of which is a mean over class weights.

LDAM-DRW's ``cifar_train.py`` builds the criterion per epoch in branches
(``nn.CrossEntropyLoss(weight=per_cls_weights)``, ``LDAMLoss(...,
weight=per_cls_weights)`` of ``losses.py``, ``FocalLoss(...)``) and hands it to
``train(train_loader, model, criterion, ...)``, which calls ``loss =
criterion(output, target)``. A cross-entropy with class ``weight=`` divides by
the sum of the weights of the batch's targets, a sum that differs between the
processes' shares: the runtime's mean over samples does not give the original
back. Where the criterion is one module built in the same function, the
reduction analysis writes the count (``accel.class_weight_count``); through a
parameter or several branches it cannot, and before this module it took the
call for a mean over samples.

The criterion is traced to the calls that build it (``model_classes._Tracer``:
through the file's assignments and the arguments every call of the function
passes); if one of them is a ``torch.nn`` loss module with class weights, or a
loss class of a local module whose ``forward`` returns such a mean
(``HelperFact.forward_loss``), the loss's reduction is unknown, with the
reason. Static only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..names import IGNORING_LOSSES
from ..subtrees import findall
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex
    from .facts import Fact


def traced_class_weights(index: ModuleIndex, func: cst.BaseExpression) -> str:
    """Why ``func(...)`` (a criterion handed in or chosen in branches) has no
    reduction the analysis can write, when one of the modules it may be is a mean
    over class weights; "" otherwise (also for one module built in this
    function, whose count the reduction analysis writes)."""
    from .model_classes import _Tracer

    if not isinstance(func, (cst.Name, cst.Attribute)):
        return ""
    key = index.key(func)
    if key is None:
        return ""
    tracer = _Tracer(index)
    origins = tracer.origins(func, frozenset(), 0)
    if isinstance(origins, str) or not origins:
        return ""
    calls = [o for o in origins if isinstance(o, cst.Call)]
    handed = tracer._parameter(key) is not None
    if not handed and len(calls) < 2:
        return ""
    for call in calls:
        weighted = _weighted_module(index, call)
        if weighted:
            how = (
                f"one of {len(calls)} modules built in branches"
                if len(calls) > 1
                else "handed in as a parameter"
            )
            return (
                f"`{code(func)}` may be {weighted}, a mean over the class weights of "
                "the targets: it divides by the sum of the weights of this "
                "process's targets, not of the whole batch's, and the criterion is "
                f"{how}, so the count (accel.class_weight_count) cannot be written "
                "where the loss is backpropagated"
            )
    return ""


def traced_nonlinear_criterion(index: ModuleIndex, func: cst.BaseExpression) -> str:
    """Why ``func(...)`` has no reduction the analysis can write, when one of the
    criteria it may be (built here, in branches, or handed in) is an instance of
    a local module's class whose ``forward`` passes a mean over the batch
    through a non-linear function (``HelperFact.nonlinear_loss``: arcface-pytorch's
    ``FocalLoss``); "" otherwise."""
    from .model_classes import _Tracer

    if not isinstance(func, (cst.Name, cst.Attribute)) or index.key(func) is None:
        return ""
    origins = _Tracer(index).origins(func, frozenset(), 0)
    if isinstance(origins, str):
        return ""
    for origin in origins:
        helper = index.helper(origin.func) if isinstance(origin, cst.Call) else origin
        if helper is not None and helper.nonlinear_loss:
            return (
                f"`{code(func)}` may be a `{helper.name}` ({helper.file}), whose "
                f"forward is no mean over samples: {helper.nonlinear_loss}; each "
                "process would apply it to its share's mean, not to the global "
                "batch's, and no weighting of the processes' losses gives the "
                "original's back"
            )
    return ""


def _weighted_module(index: ModuleIndex, call: cst.Call) -> str:
    """The spelling of ``call`` when it builds a class-weighted mean: a
    ``torch.nn`` cross-entropy/NLL module with ``weight=``, or a local module's
    loss class whose forward returns a mean over class weights."""
    names = index.qualnames(call.func)
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword}
    if any(
        q.startswith("torch.nn.") and q.rsplit(".", 1)[-1] in IGNORING_LOSSES
        for q in names
    ):
        weight = keywords.get("weight")
        reduction = keywords.get("reduction")
        if weight is None or m.matches(weight, m.Name("None")):
            return ""
        if reduction is not None and not m.matches(
            reduction, m.SimpleString('"mean"') | m.SimpleString("'mean'")
        ):
            return ""
        return f"`{code(call)}`"
    helper = index.helper(call.func)
    loss = helper.forward_loss if helper is not None else None
    if (
        helper is not None
        and loss is not None
        and loss.what.startswith("the class weights")
    ):
        return f"`{code(call)}` (`{helper.name}.forward` in {helper.file})"
    return ""


def traced_helper_function(index: ModuleIndex, func: cst.BaseExpression) -> str:
    """Why ``func(...)`` has no reduction the analysis can read, where ``func`` is
    a name that may hold (through this file's assignments and the arguments every
    call of its function passes) a local module's function whose return the
    project view does not read as a mean over samples (DeepAR's ``loss_fn =
    net.loss_fn`` handed to ``train(..., loss_fn, ...)``, a mean over the labels
    that are not zero); "" otherwise."""
    from .model_classes import _Tracer

    if not isinstance(func, cst.Name):
        return ""
    tracer = _Tracer(index)
    for leaf in _leaves(index, tracer, func, frozenset(), 0):
        if leaf is func or not isinstance(leaf, (cst.Name, cst.Attribute)):
            continue
        helper = index.helper(leaf)
        if helper is None or helper.kind != "function":
            continue
        if helper.returns == "loss" and helper.reduction == "mean":
            continue
        return (
            f"the loss is computed by `{code(func)}`, which may be `{code(leaf)}` "
            f"({helper.where}), a function whose reduction over the batch (a mean "
            "over its samples, or over a count that differs between the processes' "
            "shares, as a mean over the labels a mask selects) the analysis cannot "
            "read from its return"
        )
    return ""


def _leaves(
    index: ModuleIndex,
    tracer: object,
    expr: cst.BaseExpression,
    seen: frozenset[object],
    depth: int,
) -> list[cst.BaseExpression]:
    """The expressions ``expr`` (a name) may hold: its assigned values and the
    arguments the calls of its function pass for it, followed through names."""
    if not isinstance(expr, cst.Name) or depth > 8:
        return [expr]
    key = index.key(expr)
    if key is None or key in seen:
        return []
    seen = seen | {key}
    found: list[cst.BaseExpression] = []
    function = tracer._parameter(key)  # type: ignore[attr-defined]
    if function is not None:
        for call in index.call_sites(function):
            for k, arg in index.arguments(call):
                if k == key:
                    found += _leaves(index, tracer, arg, seen, depth + 1)
    for value in index.values.get(key, []):
        if value is not None:
            found += _leaves(index, tracer, value, seen, depth + 1)
    return found


def traced_loss_modules(
    index: ModuleIndex, call: cst.Call, func: cst.BaseExpression
) -> Fact | None:
    """The reduction of ``func(...)`` (``call``) where ``func`` is a criterion
    handed in as a parameter or built in branches, and every module it may be
    is a ``torch.nn`` loss module: a sum where every one of them sums
    (``nn.MSELoss(reduction="sum")`` built in ``main()`` and handed to
    ``train(..., criterion, epoch)``, as twtygqyy/pytorch-vdsr's
    ``nn.MSELoss(size_average=False)``), unknown where one sums and another
    does not. Round fx37b: every other reduction too, as the module built beside
    the call reads (``_loss_call``), its ``ignore_index``/``weight`` read off
    ``func`` where ``main()``'s names are not the call's (``held_settings``): a
    token mean over ``criterion.ignore_index``, a mean over
    ``criterion.weight``; unknown, naming the modules and where they were built,
    where they differ or no count can be written. None for a mean over samples
    or where a module is not ``torch.nn``'s (the callers' other rules)."""
    from .facts import Fact, _loss_call
    from .model_classes import _Tracer

    if not isinstance(func, (cst.Name, cst.Attribute)) or index.key(func) is None:
        return None
    origins = _Tracer(index).origins(func, frozenset(), 0)
    if isinstance(origins, str) or not origins:
        return None
    modules: list[tuple[str, cst.Call]] = []
    facts: list[Fact] = []
    names_of: list[str] = []  # of the torch.nn modules built here
    for origin in origins:
        if not isinstance(origin, cst.Call):
            return None
        names = [
            q
            for q in index.qualnames(origin.func)
            if q.startswith("torch.nn.") and q.endswith("Loss")
        ]
        if names:
            name = names[0].rsplit(".", 1)[-1]
            names_of.append(name)
            facts.append(_loss_call(index, name, call, origin, func, held=True))
        else:
            # `criterion = build_criterion(cfg)` of a local module's factory
            factory = _factory_fact(index, origin, call)
            if factory is None:
                return None
            facts.append(factory)
        modules.append(("", origin))
    kinds = {fact.kind for fact in facts}
    if kinds == {"sum"}:
        return Fact("sum", what=f"`{code(modules[0][1])}`")
    counts = {code(f.count) if f.count is not None else None for f in facts}
    if len(kinds) == 1 and len(counts) == 1:
        # one reduction, whichever module it is (a token mean over
        # `criterion.ignore_index`): as the module built beside the call reads;
        # a mean over samples is left to the callers' other rules
        if kinds == {"mean"}:
            # (a factory's module is no construction the others read: its mean
            # is said here)
            return facts[0] if len(facts) > len(names_of) else None
        fact, (_, built) = facts[0], modules[0]
        where = f"`{code(built)}`, {_where(index, built)}"
        if fact.kind == "unknown":
            return replace(fact, reason=f"{fact.reason} ({where})")
        if fact.kind == "token-mean" and fact.count is None:
            return replace(fact, what=f"{fact.what} ({where})")
        return fact
    spelled = " or ".join(
        f"`{code(built)}` ({_where(index, built)})" for _, built in modules
    )
    return Fact(
        "unknown",
        f"`{code(func)}` may be {spelled}: reductions over the batch that differ "
        "(a mean over samples, over the tokens it does not ignore, over class "
        "weights, or a sum), chosen at run time",
    )


def traced_summing_callable(index: ModuleIndex, func: cst.BaseExpression) -> str:
    """Why ``func(...)`` has no reduction the analysis can read, where ``func``
    may be a callable that sums and that none of the other readings follows: a
    ``lambda`` (``lambda out, y: F.mse_loss(out, y, reduction="sum")``), a
    ``functools.partial(F.l1_loss, reduction="sum")``, a module picked from a
    dict or built through ``getattr(nn, name)(reduction="sum")``; "" otherwise.
    Each was weighed as a mean over samples before (half the gradient at two
    processes, no finding). A local function or class, a helper of a local
    module and a torch.nn module built here have readings of their own."""
    if not isinstance(func, (cst.Name, cst.Attribute)) or index.key(func) is None:
        return ""
    for origin in _held_values(index, func, frozenset(), 0):
        if isinstance(origin, cst.Call) and (
            index.local_class(origin.func) is not None
            or index.callee(origin) is not None
            or index.helper(origin.func) is not None
            or any(
                q.startswith("torch.nn.") and q.endswith("Loss")
                for q in index.qualnames(origin.func)
            )
        ):
            continue
        if not isinstance(origin, (cst.Call, cst.Lambda, cst.Subscript, cst.IfExp)):
            continue
        if _sums(origin):
            return (
                f"`{code(func)}` may be `{code(origin)}`, a callable whose "
                "reduction over the batch the analysis does not read, and which "
                "sums: a sum over the batch is no mean over samples"
            )
    return ""


def _held_values(
    index: ModuleIndex, expr: cst.BaseExpression, seen: frozenset, depth: int
) -> list[cst.BaseExpression]:
    """The values ``expr`` may hold: through the file's assignments and, for a
    parameter of a local function, what its calls in the file pass."""
    key = index.key(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if key is None:
        return [expr]
    if key in seen or depth > 4:
        return []
    seen = seen | {key}
    found: list[cst.BaseExpression] = []
    for value in index.values.get(key, []):
        if value is not None:
            found += _held_values(index, value, seen, depth + 1)
    for call in index.calls:
        for param, arg in index.arguments(call):
            if param == key:
                found += _held_values(index, arg, seen, depth + 1)
    return found


def _sums(node: cst.CSTNode) -> bool:
    """Does ``node`` sum: ``reduction="sum"``, ``size_average=False``,
    ``torch.sum(...)``, ``x.sum(...)``?"""
    summed = m.Arg(keyword=m.Name("reduction"), value=m.SimpleString('"sum"'))
    summed |= m.Arg(keyword=m.Name("reduction"), value=m.SimpleString("'sum'"))
    summed |= m.Arg(keyword=m.Name("size_average"), value=m.Name("False"))
    summed |= m.Call(func=m.Attribute(attr=m.Name("sum") | m.Name("nansum")))
    return bool(findall(node, summed))


def _factory_fact(index: ModuleIndex, built: cst.Call, call: cst.Call) -> Fact | None:
    """What ``call`` (``criterion(...)``) is where ``criterion`` was returned by
    ``built``, a call of a local module's criterion factory
    (``HelperFact.criterion``); None where ``built`` is not one."""
    from .facts import Fact, reduction_rewritten

    helper = index.helper(built.func)
    if helper is None or helper.kind != "function" or not helper.criterion:
        return None
    rewritten = reduction_rewritten(index)
    if rewritten:
        # `criterion.reduction = "sum"` after the factory built it (rev19a)
        return Fact(
            "unknown",
            f"the criterion is built by {helper.where}, {rewritten} (its "
            "reduction may be another one)",
        )
    if helper.criterion in ("sum", "mean"):
        return Fact(helper.criterion)  # type: ignore[arg-type]
    if helper.criterion == "none":
        return Fact("elements", unranked=code(call))
    return Fact(
        "unknown",
        f"the criterion is built by {helper.where}, whose loss modules "
        + (
            "average over the tokens or class weights of the batch, a count "
            "that cannot be written here"
            if helper.criterion == "token-mean"
            else "reduce the batch in ways that differ or cannot be read"
        ),
    )


def _where(index: ModuleIndex, node: cst.CSTNode) -> str:
    """``built in `main```: the function a criterion was built in."""
    function = index.enclosing_function(node)
    if function is None:
        return "built at module level"
    return f"built in `{function.name.value}`"
