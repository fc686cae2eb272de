"""Reductions of a loss over some of its dimensions (``x.sum(-1)``,
``x.mean()``) and statistics of the batch (``x.var(0)``, ``x.max()``): the
facts of the loss reduction analysis that read ``dim`` arguments."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst
import libcst.matchers as m

from .facts import _ELEMENTS, Fact, code


def _reduced(inner: Fact, how: str, args: Iterable[cst.Arg], call: cst.Call) -> Fact:
    """``x.sum(...)`` / ``x.mean(...)`` of a value with fact ``inner``."""
    dims = [a.value for a in args if a.keyword is None or a.keyword.value == "dim"]
    if dims:
        dim = dims[0]
        values = (
            [e.value for e in dim.elements]
            if isinstance(dim, (cst.Tuple, cst.List))
            else [dim]
        )
        if not all(isinstance(v, cst.Integer) or _negative(v) for v in values):
            if inner.reduced:
                return inner
            return Fact(
                "unknown",
                f"`{code(call)}` reduces over dimensions the analysis cannot read",
            )
        over_batch = any(isinstance(v, cst.Integer) and v.value == "0" for v in values)
        if not over_batch:
            if inner.reduced or inner.kind == "unknown":
                return inner
            if inner.kind == "elements" and any(
                _negative(v) and (inner.unranked or v.expression.value != "1")  # type: ignore[attr-defined]
                for v in values
            ):
                # `F.bce_with_logits(logit, y, reduction="none").sum(-1)` of a
                # 1-D loss: the sum over the batch itself, and `.sum(-2)` of a 2-D one
                return Fact(
                    "unknown",
                    f"`{code(call)}` reduces a per-sample loss over a dimension "
                    "counted from the end, which is the batch's own where the loss "
                    "has one dimension (the analysis cannot tell it has two or "
                    "more), or its first of two (`-2`): reduce over a dimension "
                    "counted from the start (`dim=1`)",
                )
            # (over a dimension from the start: of fewer dimensions it raises)
            return Fact("elements", selected=inner.selected, unranked=inner.unranked)
    if inner.kind in ("elements",):
        if how == "mean" and inner.selected:
            return Fact(
                "unknown",
                f"`{code(call)}` averages over the rows `{inner.selected}` selects "
                "(a boolean mask or indices of the batch), a number that differs "
                "between the processes' shares, not over the batch's samples: "
                "pass this process's number of them as accel.backward(count=...), "
                "or sum the loss and divide by the global number",
            )
        return Fact(how)  # type: ignore[arg-type]
    return inner


#: A tensor's largest or smallest value: over dimension 0 (or the whole tensor)
#: a statistic of the batch, as ``var``; with a second tensor, elementwise.
_EXTREMES = frozenset({"max", "min", "amax", "amin"})


def extreme(call: cst.Call, args: Sequence[cst.Arg]) -> Fact | None:
    """``x.max()``, ``x.max(0)``, ``torch.amax(x, dim=0)``: a statistic of the
    batch; ``x.max(1)``: per sample; ``x.max(y)``, ``torch.max(a, b)``: None
    (elementwise, the caller's other cases)."""
    dims = [a for a in args if a.keyword is None or a.keyword.value == "dim"]
    if (
        dims
        and dims[0].keyword is None
        and not isinstance(dims[0].value, (cst.Integer, cst.UnaryOperation))
    ):
        return None
    return _statistic(call, args)


def _statistic(call: cst.Call, args: Iterable[cst.Arg]) -> Fact:
    """``x.var(0)``, ``x.std()``: over the batch, neither a sum nor a mean."""
    dims = [a.value for a in args if a.keyword is None or a.keyword.value == "dim"]
    if dims and not m.matches(dims[0], m.Integer("0")):
        return _ELEMENTS
    return Fact(
        "unknown",
        f"the loss goes through a statistic of the batch (`{code(call)}`)",
    )


def _negative(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
    )
