"""Operands the reduction analysis reads by their shape: tensors of the model's
weights (an L2 term), elementwise functions of two tensors (PPO's clipped
surrogate), and the batch's values centred by their own mean (advantages
normalised per minibatch)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..names import JOINS
from .facts import _ELEMENTWISE_OF_TWO, Fact

#: Builders of one tensor from many: of the model's parameters, no batch in it.
_TO_VECTOR = frozenset(
    {
        "torch.nn.utils.parameters_to_vector",
        "torch.nn.utils.convert_parameters.parameters_to_vector",
    }
)
_OVER_PARAMETERS = m.Call(
    func=m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters"))
)


def over_parameters(names: set[str], call: cst.Call) -> bool:
    """``torch.cat([p.view(-1) for p in model.parameters()])`` or
    ``parameters_to_vector(model.parameters())``: the weights, not the batch."""
    if names & _TO_VECTOR:
        return True
    if not (names & JOINS) or not call.args:
        return False
    joined = call.args[0].value
    return isinstance(joined, (cst.GeneratorExp, cst.ListComp)) and m.matches(
        joined.for_in.iter, _OVER_PARAMETERS
    )


def elementwise_of_two(names: set[str], call: cst.Call) -> bool:
    """``torch.max(a, b)``: two tensors compared elementwise (not a ``dim``)."""
    positional = [a for a in call.args if a.keyword is None]
    return (
        any(
            n.startswith("torch.") and n.rsplit(".", 1)[-1] in _ELEMENTWISE_OF_TWO
            for n in names
        )
        and len(positional) == 2
        and not any(
            a.keyword is not None and a.keyword.value == "dim" for a in call.args
        )
        and not isinstance(positional[1].value, (cst.Integer, cst.UnaryOperation))
    )


_BATCH_STATISTICS = frozenset({"mean", "sum", "std", "var", "nanmean"})


def centred(expr: cst.BinaryOperation, left: Fact, right: Fact) -> str | None:
    """``adv - adv.mean()``: one side is a reduction over the whole batch (no
    dim, or dim 0) of an expression the other side, the batch's values, is or
    holds; the name of that reduction, or None."""
    for side, other, fact in (
        (expr.right, expr.left, left),
        (expr.left, expr.right, right),
    ):
        if fact.kind != "elements":
            continue
        call = side
        while isinstance(call, cst.BinaryOperation):  # `x.std() + 1e-8`
            call = call.left
        if not (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _BATCH_STATISTICS
        ):
            continue
        dims = [
            a.value
            for a in call.args
            if a.keyword is None or a.keyword.value in ("dim", "axis")
        ]
        if dims and not m.matches(dims[0], m.Integer("0")):
            continue
        if _holds(other, call.func.value):
            return call.func.attr.value
    return None


def _holds(tree: cst.CSTNode, part: cst.CSTNode) -> bool:
    """Is ``part`` (by its code) ``tree`` or under it?"""
    if type(tree) is type(part) and tree.deep_equals(part):
        return True
    return any(_holds(child, part) for child in tree.children)
