"""A loss computed in the ``forward`` of a model class of another file.

``logits, loss = model(x, y)``, with ``model = GPT(config)`` and ``GPT`` a model
class of a local module whose ``forward`` returns ``(logits, loss)``
(``forward_losses``: the project view's ``HelperFact.forward_loss``). The loss's
reduction is the one learnt from that file: a mean over samples or a sum is
weighed as such; a mean over the targets that are not ``ignore_index`` is a
token mean, counted as ``(y != ignore).sum()`` of the argument the call passes
for the forward's targets parameter. Where that argument cannot be told, the
count is not known where the loss is backpropagated: needs-review, with the
file named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .facts import Fact, model_output
from .loss_inputs import not_ignored_count
from .model_classes import called_model
from .placement import code

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex
    from ..project_facts import ForwardLoss, HelperFact


def forward_loss_fact(index: ModuleIndex, key: Key) -> Fact | None:
    """The fact of ``key`` when every binding of it unpacks the loss of a model's
    forward; None when none is shown to be a model's call (the caller's default
    holds)."""
    sources = index.unpacked.get(key, [])
    if not sources or any(v is not None for v in index.values.get(key, [])):
        return None
    facts: list[Fact] = []
    for value, position, length in sources:
        called = called_model(index, value)
        if called is None:
            return None
        model = called.fact
        if model is None:
            return _unseen(value, called.why)  # type: ignore[arg-type]
        loss = model.forward_loss
        if loss is None or (loss.position, loss.length) != (position, length):
            return model_output(
                f"`{key[1]}` is item {position} of the {length} values "
                f"`{code(value)}` returns, and `{model.name}.forward` in "
                f"{model.file} returns no loss the analysis can read there",
            )
        facts.append(_fact(model, loss, value))  # type: ignore[arg-type]
    kinds = {f.kind for f in facts}
    if len(kinds) != 1:
        return Fact(
            "unknown", "the loss is unpacked from forwards of different reductions"
        )
    if len(facts) > 1 and facts[0].kind == "token-mean":
        # Each call counts its own targets: which one reaches the backward is not
        # followed here, so no count is written.
        return Fact(
            "token-mean",
            reason=f"the loss is a mean over {facts[0].what}, and `{key[1]}` is "
            f"unpacked from {len(facts)} model calls, each with its own count",
            what=facts[0].what,
        )
    return facts[0]


def model_call_fact(index: ModuleIndex, call: cst.Call) -> Fact | None:
    """``loss = model(x, y)`` of a model class whose ``forward`` returns the loss
    alone (``return F.cross_entropy(..., ignore_index=-1)``): that loss's
    reduction, a token mean counted as for a returned tuple's loss. None where
    the call is not such a model's (the caller's default holds)."""
    called = called_model(index, call)
    model = called.fact if called is not None else None
    loss = model.forward_loss if model is not None else None
    if model is None or loss is None or loss.length:
        return None
    return _fact(model, loss, call)


def indexed_output_fact(index: ModuleIndex, expr: cst.Subscript) -> Fact | None:
    """The fact of ``outputs[0]`` where every value of ``outputs`` is a model's
    call (``outputs = model(**batch)``, a Hugging Face model with
    ``return_dict=False``): as for ``loss, logits = model(...)``; None where
    ``outputs`` is not a model's output or the index is not an integer."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    literal = expr.slice[0].slice.value
    negative = isinstance(literal, cst.UnaryOperation) and isinstance(
        literal.operator, cst.Minus
    )
    number = literal.expression if negative else literal  # type: ignore[attr-defined]
    if not isinstance(number, cst.Integer):
        return None
    position = -int(number.value) if negative else int(number.value)
    base = expr.value
    key = index.key(base) if isinstance(base, cst.Name) else None
    calls = [base] if isinstance(base, cst.Call) else []
    if key is not None:
        calls = list(index.values.get(key, []))  # type: ignore[arg-type]
    if not calls or not all(isinstance(c, cst.Call) for c in calls):
        return None
    facts: list[Fact] = []
    for call in calls:
        called = called_model(index, call)
        if called is None:
            return None
        model = called.fact
        if model is None:
            return _unseen(call, called.why)  # type: ignore[arg-type]
        loss = model.forward_loss
        if (
            loss is None
            or not loss.length
            or position not in (loss.position, loss.position - loss.length)
        ):
            return model_output(
                f"`{code(expr)}` is an output of `{model.name}.forward` in "
                f"{model.file}, which returns no loss the analysis can read there"
            )
        facts.append(_fact(model, loss, call))  # type: ignore[arg-type]
    if len({f.kind for f in facts}) != 1 or (
        len(facts) > 1 and facts[0].kind == "token-mean"
    ):
        return Fact(
            "unknown", f"`{code(base)}` holds the outputs of several model calls"
        )
    return facts[0]


def _unseen(call: cst.Call, why: str) -> Fact:
    return model_output(
        f"the loss is computed in the forward of `{code(call.func)}`, a model whose "
        f"class the analysis cannot tell ({why}), so its reduction is not seen: if "
        "it is a mean over tokens (a `cross_entropy` with `ignore_index`, or over "
        "labels that are not -100), pass count=<this process's count of them>",
    )


def _fact(model: HelperFact, loss: ForwardLoss, call: cst.Call) -> Fact:
    where = f"`{model.name}.forward` in {model.file}"
    reduction, what = loss.reduction, loss.what
    if reduction == "mean":
        return Fact("mean")
    if reduction == "sum":
        return Fact("sum", what=f"{where} returns a sum-reduced loss")
    if reduction == "token-mean":
        count = _count(loss, call)
        if count is not None:
            return Fact(
                "token-mean", count=count, anchor=call, what=f"{what} in {where}"
            )
        differs = (
            "(the sum of the weights of their targets' classes)"
            if what.startswith("the class weights")
            else "(targets set to the ignored value)"
        )
        return Fact(
            "token-mean",
            reason=f"the loss is a mean over {what}, computed inside {where}: its "
            "count of them is not known where the loss is backpropagated, and "
            f"it can differ between the processes' shares {differs}",
            what=f"{what} in {where}",
        )
    return Fact(
        "unknown", f"the loss is computed inside {where}, with a reduction not known"
    )


def _count(loss: ForwardLoss, call: cst.Call) -> cst.BaseExpression | None:
    """``(y != -1).sum()`` for ``model(x, y)``: the count of the targets the
    forward does not ignore, of the argument the call passes for its targets
    parameter; None where that argument cannot be told (``*args``, a value
    that is not a plain name or attribute)."""
    if not loss.target_parameter or any(a.star for a in call.args):
        return None
    keyword = [
        a.value
        for a in call.args
        if a.keyword is not None and a.keyword.value == loss.target_parameter
    ]
    positional = [a.value for a in call.args if a.keyword is None]
    if keyword:
        argument = keyword[0]
    elif 0 <= loss.target_position < len(positional):
        argument = positional[loss.target_position]
    else:
        return None
    if not isinstance(argument, (cst.Name, cst.Attribute)):
        return None
    return not_ignored_count(argument.deep_clone(), cst.parse_expression(loss.ignored))


def model_method(index: ModuleIndex, call: cst.Call) -> cst.FunctionDef | None:
    """The method a call such as ``model.loss_function(recons, x, mu, log_var)``
    runs, where ``model`` holds an instance of one local class that defines it
    (PyTorch-VAE's models compute their loss in a method of their own); None
    for ``forward`` and ``__call__`` (the model's own call: ``model_call_fact``)
    and where the class is not one known local class."""
    from ..model_methods import instance_classes

    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value in (
        "forward",
        "__call__",
    ):
        return None
    receiver = func.value
    if isinstance(receiver, cst.Name) and receiver.value == "self":
        return None  # the index's callee reads self. methods
    classes = instance_classes(index, receiver)
    if len(classes) != 1:
        return None
    cls = next(iter(classes))
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    return next(
        (
            s
            for s in body
            if isinstance(s, cst.FunctionDef) and s.name.value == func.attr.value
        ),
        None,
    )


def imported_method_fact(index: ModuleIndex, call: cst.Call) -> Fact | None:
    """The reduction of ``model.loss_function(...)`` where ``model`` holds an
    instance of a model class of another module whose method returns a loss
    (``HelperFact.method_losses``): the one read there, or unknown where the
    method computes a loss its return does not let the view place (a mean is
    never assumed); None where the call is no such method's."""
    from ..imported_draws import instance_facts

    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value in (
        "forward",
        "__call__",
    ):
        return None
    name = func.attr.value
    found: dict[str, HelperFact] = {}
    # sorted: the facts are a set, and which one names a reduction must not
    # change from run to run
    facts = sorted(instance_facts(index, func.value), key=lambda f: (f.file, f.name))
    for fact in facts:
        reduction = dict(fact.method_losses).get(name)
        if reduction is not None:
            found[reduction] = fact
    if not found:
        return None
    where = ", ".join(f"`{f.name}.{name}` in {f.file}" for f in found.values())
    if len(found) > 1:
        return Fact(
            "unknown", f"the loss is returned by {where}, of different reductions"
        )
    reduction = next(iter(found))
    if reduction == "mean":
        return Fact("mean")
    if reduction == "sum":
        return Fact("sum", what=f"{where} returns a sum-reduced loss")
    if reduction == "":
        return Fact(
            "unknown",
            f"the loss is returned by {where}, whose reduction over the batch (a "
            "mean or a sum over its samples) the analysis cannot read from its "
            "return",
        )
    return Fact(
        "unknown", f"the loss is computed inside {where}, with a reduction not known"
    )
