"""The loss a model class of a local module computes in its own ``forward``.

minGPT's ``GPT.forward(idx, targets=None)`` ends with ``loss =
F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
ignore_index=-1)`` and ``return logits, loss``; a script in another folder does
``logits, loss = model(x, y)`` and ``loss.backward()``. Where that loss is a mean
over the targets that are not ``ignore_index`` (tokens), each process's count of
them can differ (padding, prompts masked with -1), so the runtime cannot weigh it
as a mean over samples without being told the count: the reduction analysis
(``reduction``) reports it, naming the file the fact came from.

A factory (``def get_model(cfg): return GPT(cfg)``) records the class every one
of its returns builds (``built_class``), so that ``model = get_model(cfg)``
runs that class's ``forward``.

Followed: a ``forward`` whose every ``return`` is a tuple display of one length,
with the loss at one position in each (through its local variables; a ``loss =
None`` or ``return logits, None`` for the call without targets is not a loss,
and is skipped). Static only:
``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .project_facts import ForwardLoss, HelperFact
from .project_nodes import SAME_OBJECT_METHODS, same_object_of

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

_DEPTH = 6


def built_class(
    facts: HelperFacts,
    returns: list[ast.Return],
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> HelperFact | None:
    """The local model class every ``return`` of the factory ``function`` builds
    (``return GPT(cfg)``, also through a local variable, ``.to(device)`` and
    another factory); None where the returns build different or unknown classes."""
    found = {_class_of(facts, r.value, function, 0) for r in returns if r.value}
    if len(found) != 1 or len(returns) != sum(1 for r in returns if r.value):
        return None
    return found.pop()


def _class_of(
    facts: HelperFacts, expr: ast.expr, function: ast.AST, depth: int
) -> HelperFact | None:
    from .project_nodes import assigned_in

    if depth > _DEPTH:
        return None
    if isinstance(expr, ast.IfExp):
        both = {
            _class_of(facts, e, function, depth + 1) for e in (expr.body, expr.orelse)
        }
        return both.pop() if len(both) == 1 else None
    if isinstance(expr, ast.Name):
        values = assigned_in(function, expr.id)
        # `net = net.cuda()` is the same object: its other values decide
        values = [v for v in values if not same_object_of(v, expr.id)]
        found = {_class_of(facts, v, function, depth + 1) for v in values}
        return found.pop() if len(found) == 1 else None
    if not isinstance(expr, ast.Call):
        return None
    if isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_OBJECT_METHODS:
        return _class_of(facts, expr.func.value, function, depth + 1)
    target = facts.resolve(expr.func)
    fact = facts._follow(target) if isinstance(target, tuple) else None
    if fact is None or fact.returns != "model":
        return None
    return fact if fact.kind == "class" else fact.model_class


def forward_loss(facts: HelperFacts, cls: ast.ClassDef) -> ForwardLoss | None:
    """The loss ``cls.forward`` returns in a tuple, or alone (``length`` 0: every
    ``return`` is the loss itself), or None when it returns none (or not at one
    known place)."""

    forward = next(
        (
            m
            for m in cls.body
            if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
            and m.name == "forward"
        ),
        None,
    )
    if forward is None:
        return None
    return returned_loss(facts, forward, single=True)


def tuple_loss(
    facts: HelperFacts, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> ForwardLoss | None:
    """The loss a plain function of a local module returns in a tuple (``return
    loss, to_cpu(...)``, ``return loss_val, acc_val``): its position and
    reduction, read as for a ``forward``; None where no return is a tuple, or no
    one position of them holds a loss the view can read."""
    found = returned_loss(facts, function, single=False)
    return found if found is not None and found.length else None


def returned_loss(
    facts: HelperFacts,
    forward: ast.FunctionDef | ast.AsyncFunctionDef,
    single: bool,
) -> ForwardLoss | None:
    """The loss ``forward`` returns at one position of a tuple (or alone, with
    ``single``), as ``forward_loss`` tells it."""
    from .project_helpers import _own_nodes, assigned_in

    returns = [n for n in _own_nodes(forward) if isinstance(n, ast.Return)]
    if (
        single
        and returns
        and not any(
            r.value is None or isinstance(r.value, (ast.Tuple, ast.Constant))
            for r in returns
        )
    ):
        # `return F.cross_entropy(...)`: one value, the loss itself (length 0)
        tuples = [ast.Tuple(elts=[r.value], ctx=ast.Load()) for r in returns]
        single = True
    elif returns and all(
        isinstance(r.value, ast.Tuple)
        and not any(isinstance(e, ast.Starred) for e in r.value.elts)
        for r in returns
    ):
        tuples = [r.value for r in returns]  # type: ignore[misc]
        single = False
    else:
        return None
    lengths = {len(t.elts) for t in tuples}
    if len(lengths) != 1:
        return None
    length = lengths.pop()

    def losses_of(expr: ast.expr) -> list[ast.expr]:
        """The loss values ``expr`` may hold (``None`` left out)."""
        if isinstance(expr, ast.Name):
            values = [
                v
                for v in assigned_in(forward, expr.id)
                if not (isinstance(v, ast.Constant) and v.value is None)
            ]
            return values
        if isinstance(expr, ast.Constant) and expr.value is None:
            return []  # `return logits, None` of the call without targets
        return [expr]

    found: list[tuple[int, set[str], list[ast.expr]]] = []
    for position in range(length):
        values = [v for t in tuples for v in losses_of(t.elts[position])]
        kinds = {facts.kind_of(v, forward, 0) for v in values}
        if values and {k for k, _, _ in kinds} == {"loss"}:
            found.append((position, {r for _, r, _ in kinds}, values))
    if len(found) != 1:
        return None
    position, reductions, values = found[0]
    reduction = reductions.pop() if len(reductions) == 1 else "unknown"
    if single:
        length = 0
    if reduction != "token-mean":
        return ForwardLoss(position, length, reduction)
    counted = _counted_targets(forward, values)
    what = _token_mean_what(values)
    if counted is None:
        return ForwardLoss(position, length, reduction, what)
    return ForwardLoss(position, length, reduction, what, *counted)


#: Methods of the targets that keep every element (and so the count of those
#: that are not ignored): ``targets.view(-1)``.
_SAME_ELEMENTS = frozenset({"view", "reshape", "flatten", "contiguous"})


def _counted_targets(
    forward: ast.FunctionDef | ast.AsyncFunctionDef, values: list[ast.expr]
) -> tuple[str, int, str] | None:
    """(parameter, its position, ignored value) when the loss is one call
    ``F.cross_entropy(logits, P.view(-1), ignore_index=K)``: its targets are
    every element of the parameter ``P`` (never rebound in ``forward``), ``K``
    is a literal integer, and no class weights or other reduction are set. The
    count of the targets that are not ``K`` is then ``(arg != K).sum()`` of the
    caller's argument for ``P``."""
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return None
    call = values[0]
    keywords = {k.arg: k.value for k in call.keywords}
    if None in keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    weight = keywords.get("weight")
    if weight is not None and not (
        isinstance(weight, ast.Constant) and weight.value is None
    ):
        return None
    reduction = keywords.get("reduction")
    if reduction is not None and not (
        isinstance(reduction, ast.Constant) and reduction.value == "mean"
    ):
        return None
    ignored = keywords.get("ignore_index")
    literal = (
        ignored.operand
        if isinstance(ignored, ast.UnaryOp) and isinstance(ignored.op, ast.USub)
        else ignored
    )
    if not (
        isinstance(literal, ast.Constant)
        and type(literal.value) is int  # not a bool, not a name rebound elsewhere
    ):
        return None
    if len(call.args) >= 2:
        target = call.args[1]
    elif "target" in keywords:
        target = keywords["target"]
    else:
        return None
    while (
        isinstance(target, ast.Call)
        and isinstance(target.func, ast.Attribute)
        and target.func.attr in _SAME_ELEMENTS
    ):
        target = target.func.value
    if not isinstance(target, ast.Name) or _changed(forward, target.id):
        return None
    arguments = forward.args
    positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]][1:]
    if target.id in positional:
        position = positional.index(target.id)
    elif target.id in [a.arg for a in arguments.kwonlyargs]:
        position = -1
    else:
        return None
    return (target.id, position, ast.unparse(ignored))  # type: ignore[arg-type]


def _token_mean_what(values: list[ast.expr]) -> str:
    """``the targets that are not `ignore_index` (-1) of `F.cross_entropy` ``, or
    ``the class weights (`weight=self.weight`) of the targets of ...``."""
    for value in values:
        for node in ast.walk(value):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if keyword.arg == "weight":
                    return (
                        f"the class weights (`weight={ast.unparse(keyword.value)}`) "
                        f"of the targets of `{ast.unparse(node.func)}`"
                    )
                if keyword.arg == "ignore_index":
                    return (
                        f"the targets that are not `ignore_index` "
                        f"({ast.unparse(keyword.value)}) of "
                        f"`{ast.unparse(node.func)}`"
                    )
    return "the targets that are not `ignore_index`"


def _changed(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """Is ``name`` rebound (``name = ...``, ``a, name = ...``, ``name += ...``, a
    loop or ``with`` target) or changed in place (``name[mask] = -1``,
    ``name.masked_fill_(...)``) anywhere in ``function``?"""
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id == name:
            if not isinstance(node.ctx, ast.Load):
                return True
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(
            node.ctx, ast.Load
        ):
            base = node.value
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name) and base.id == name:
                return True
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.endswith("_")
            and not node.func.attr.startswith("_")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name
        ):
            return True
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return True
    return False
