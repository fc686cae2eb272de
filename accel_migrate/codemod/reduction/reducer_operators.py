"""The reduction of a loss's operators (``a + b``, ``a * b``, ``a / b``,
``a ** 2``): the part of the loss reduction analysis (``reduction._Reducer``)
that combines the facts of two operands."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import variable_names
from ..subtrees import findall
from .facts import (
    _CONSTANT,
    _ELEMENTS,
    Fact,
    _added,
    _counts_samples,
    _nonlinear,
    _scaled,
    _setting,
    code,
)
from .model_classes import called_model
from .operands import centred
from .row_weights import row_count_weight

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex


class _Operators:
    """``_Reducer``'s operators (a base of it: ``fact`` is its)."""

    index: ModuleIndex

    def _binary(self, expr: cst.BinaryOperation, at: cst.CSTNode, depth: int) -> Fact:
        left = self.fact(expr.left, at, depth + 1)
        right = self.fact(expr.right, at, depth + 1)
        op = expr.operator
        if isinstance(op, (cst.Add, cst.Subtract)):
            statistic = centred(expr, left, right)
            if statistic is not None:
                return Fact(
                    "unknown",
                    f"the loss reads `{code(expr)}`, the batch's values shifted by "
                    f"their own {statistic} (a normalisation over the batch, as of "
                    "advantages or features): each process would use its share's "
                    f"{statistic}, not the global batch's",
                )
            return _added(left, right)
        if isinstance(op, cst.Multiply):
            for a, b, b_expr in ((left, right, expr.right), (right, left, expr.left)):
                if a.kind == "constant" and (
                    b.kind == "constant" or _setting(self.index, b_expr)
                ):
                    return _CONSTANT  # `args.weight_decay * l2` of the weights
                if a.kind == "mean" and _counts_samples(self.index, b_expr):
                    return Fact("sum")  # a batch mean times the batch size
                if a.reduced and b.kind in ("constant", "elements"):
                    # A weight of a reduced loss (`0.5 * kld`, `args.alpha * loss`),
                    # unless it reads the batch's row count.
                    why = row_count_weight(self.index, b_expr)
                    return Fact("unknown", why) if why else a
            return _scaled(left, right)
        if isinstance(op, cst.Divide):
            return self._divided(left, right, expr.right)
        if isinstance(op, cst.Power) and left.reduced:
            return _nonlinear(left, f"`{code(expr)}`")
        return _scaled(left, right)

    def _divided(self, left: Fact, right: Fact, divisor: cst.BaseExpression) -> Fact:
        if left.kind == "unknown":
            return left
        if right.kind == "unknown":
            return right  # `adv / (adv.std() + 1e-8)`: whatever the dividend is
        if left.kind == "elements" and right.reduced:
            return Fact(
                "unknown",
                f"the loss divides the batch's values by `{code(divisor)}`, a "
                "reduction of the batch (a normalisation over it): each process "
                "would divide by its share's, not the global batch's",
            )
        if left.kind == "sum":
            if right.kind == "sum" and _may_depend_on_model(self.index, divisor):
                # `2 * (p * t).sum() / (p + t).sum()`: a Dice or IoU term, a
                # ratio of the batch's sums whose divisor moves with the model.
                # Weighting each process by a count is right only for a count
                # that does not (a mask, the targets that are not ignored).
                return Fact(
                    "unknown",
                    f"the loss divides a sum over the batch by `{code(divisor)}`, "
                    "which may depend on the model's output, as a Dice or IoU "
                    "term's does: then it is a ratio of the batch's sums, which no "
                    "weighting of each process's share rebuilds; if it counts "
                    "samples, tokens or weights that do not depend on the model, "
                    "pass this process's count to accel.backward(count=...)",
                )
            if right.kind == "sum":
                # `(l * mask).sum() / mask.sum()`: a mean over what the mask counts.
                anchor = self._anchor(divisor)
                return Fact(
                    "token-mean",
                    count=divisor,
                    anchor=anchor,
                    what=f"the elements `{code(divisor)}` counts",
                )
            if _counts_samples(self.index, divisor):
                return Fact("mean")
            if right.kind == "constant" or _setting(self.index, divisor):
                return left
            return Fact(
                "unknown",
                f"a sum over the batch is divided by `{code(divisor)}`, which the "
                "analysis cannot tell apart as this process's count or a constant",
            )
        if left.kind in ("mean", "token-mean", "constant", "unknown"):
            return left  # `/ accumulation_steps`: a mean stays a mean
        if left.reason and (right.kind == "constant" or _setting(self.index, divisor)):
            return left  # a model's own loss over the accumulation steps
        return _ELEMENTS

    def _anchor(self, expr: cst.BaseExpression) -> cst.CSTNode:
        return expr


def _may_depend_on_model(
    index: ModuleIndex,
    expr: cst.BaseExpression,
    depth: int = 0,
    seen: set[Key] | None = None,
) -> bool:
    """Could ``expr`` depend on a model's output, and so on its parameters? A
    call of a model, followed through variables and the arguments this file's
    calls pass its functions; a parameter no call of the file is seen to pass
    (a loss class's ``forward``, whose inputs may be the predictions) may."""
    if depth > 6:
        return True
    seen = set() if seen is None else seen
    for call in findall(expr, m.Call()):
        if called_model(index, call) is not None:  # type: ignore[arg-type]
            return True
    for name in variable_names(expr):
        key = index.key(name)
        if key is None or name.value == "self" or key in seen:
            continue  # (`src, tgt = src.cuda(), tgt.cuda()` reads itself)
        seen.add(key)
        values = index.values.get(key)
        unpacked = index.unpacked.get(key, [])
        if values is None and not unpacked:
            function = index.enclosing_function(name)
            params = function.params if function is not None else None
            if params is None or not any(
                p.name.value == name.value
                for p in (*params.posonly_params, *params.params, *params.kwonly_params)
            ):
                continue  # bound elsewhere (a loop's target over a loader)
            sites = index.call_sites(function)  # type: ignore[arg-type]
            if not sites:
                return True
            for site in sites:
                for param, arg in index.arguments(site):
                    if param == key and _may_depend_on_model(
                        index, arg, depth + 1, seen
                    ):
                        return True
            continue
        for value in values or ():
            if value is not None and _may_depend_on_model(
                index, value, depth + 1, seen
            ):
                return True
        for value, _, _ in unpacked:
            if _may_depend_on_model(index, value, depth + 1, seen):
                return True
    return False
