"""How a batch mean that is a Python number depends on this process's batch.

``accel.global_loss`` takes a tensor. A number that is linear in the batch's
mean losses (``acc = (pred == y).float().mean().item()``) is combined weighted
by each process's share of the batch; one computed through a non-linear
function of them (PSNR: ``10 * log10(1 / mse.item())``) cannot be combined from
the processes' values, so the losses it is computed from are made the whole
batch's; one computed by a function of this file from them is "opaque".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import libcst as cst
import libcst.matchers as m

from ..subtrees import findall
from .kinds import BatchKinds, inside, read_of

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: How a per-batch value depends on this process's batch (see ``BatchForms.form``).
Form = Literal["constant", "linear", "nonlinear", "opaque", "other"]

#: Functions of numbers (or of 0-d tensors) that read nothing but their arguments.
_PURE_PREFIXES = ("math.", "numpy.", "torch.")
_PURE_BUILTINS = frozenset(
    f"builtins.{name}" for name in ("abs", "round", "pow", "min", "max", "float")
)


class BatchForms:
    """The forms of the per-batch values of one module."""

    def __init__(self, kinds: BatchKinds) -> None:
        self.kinds = kinds
        self.index: ModuleIndex = kinds.index

    def form(
        self,
        value: cst.BaseExpression,
        loop: cst.CSTNode,
        reads: list[cst.BaseExpression],
        depth: int = 0,
    ) -> Form:
        """How ``value`` depends on this process's batch: not at all ("constant"),
        linearly on batch-mean losses ("linear": plus, minus, times or over a
        constant), through other arithmetic or pure functions of them
        ("nonlinear"), through a function of this file ("opaque"), or otherwise
        ("other": tensors, sums, unknown names). ``reads`` collects the batch-mean
        reads it is computed from (``mse.item()``, ``float(mse)``, ``mse``)."""
        if depth > 3:
            return "other"
        if isinstance(value, (cst.Integer, cst.Float)):
            return "constant"
        if isinstance(value, cst.UnaryOperation) and isinstance(
            value.operator, (cst.Minus, cst.Plus)
        ):
            return self.form(value.expression, loop, reads, depth)
        if read_of(value) is not value:
            if self.kinds.kind(value, loop) != "mean":
                return "other"
            reads.append(value)
            return "linear"
        if isinstance(value, cst.BinaryOperation):
            left = self.form(value.left, loop, reads, depth)
            right = self.form(value.right, loop, reads, depth)
            forms = {left, right}
            if forms & {"other", "opaque"}:
                return (
                    "opaque" if "opaque" in forms and "other" not in forms else "other"
                )
            if forms == {"constant"}:
                return "constant"
            op = value.operator
            if isinstance(op, (cst.Add, cst.Subtract)):
                return "nonlinear" if "nonlinear" in forms else "linear"
            if isinstance(op, cst.Multiply) and "constant" in forms:
                return left if right == "constant" else right
            if isinstance(op, cst.Divide) and right == "constant":
                return left
            return "nonlinear"
        if isinstance(value, cst.Call):
            if self._helper_mean_number(value):
                return "linear"  # `batch_accuracy(out, y)` of a local module
            if self.index.local_function(value.func):
                inner: list[cst.BaseExpression] = []
                returned = self._returned_form(value, depth)
                if returned != "other":
                    return returned  # a linear mean (accuracy in percent), or not
                forms = {self.form(a.value, loop, inner, depth) for a in value.args}
                if forms - {"constant", "other"} or self._returns_float(value):
                    return "opaque"
                return "other"
            names = self.index.qualnames(value.func)
            if not names or not all(
                n.startswith(_PURE_PREFIXES) or n in _PURE_BUILTINS for n in names
            ):
                return "other"
            if not value.args or any(a.star or a.keyword for a in value.args):
                return "other"
            forms = {self.form(a.value, loop, reads, depth) for a in value.args}
            if forms & {"other", "opaque"}:
                return (
                    "opaque" if "opaque" in forms and "other" not in forms else "other"
                )
            return "constant" if forms == {"constant"} else "nonlinear"
        if isinstance(value, cst.Name):
            key = self.index.key(value)
            values = self.index.values.get(key, []) if key is not None else []
            if not values or any(v is None for v in values):
                return "other"
            if all(isinstance(v, (cst.Integer, cst.Float)) for v in values):
                return "constant"
            if len(values) != 1 or not inside(self.index, values[0], loop):
                return "other"
            source = values[0]
            if isinstance(source, cst.Call) and (
                self.kinds.mean_loss(source)
                or m.matches(
                    source, m.Call(func=m.Attribute(attr=m.Name("mean")), args=[])
                )
            ):
                reads.append(value)  # a batch-mean loss tensor
                return "linear"
            return self.form(source, loop, reads, depth + 1)
        return "other"

    def returns_number(self, value: cst.BaseExpression) -> bool:
        """A call of a function of this file whose every return is a number
        (``....item()``, ``float(...)``, times or over a constant)."""
        if not isinstance(value, cst.Call):
            return False
        if self._helper_mean_number(value):
            return True
        returns = self._callee_returns(value)
        return bool(returns) and all(is_number(r) for r in returns)

    def number_valued(self, value: cst.BaseExpression) -> bool:
        """Is ``value`` a Python number read off a tensor: ``loss.item()``,
        ``float(loss)``, arithmetic of such reads with literals, names and
        attributes (``loss.item() / args.batch_size``, the ConvLSTM repository's
        ``loss_aver``), or a name every assignment of which is one?
        ``accel.global_loss`` takes a tensor: such a value goes through
        ``torch.as_tensor`` instead of crashing on a float."""
        if isinstance(value, cst.Name):
            key = self.index.key(value)
            values = self.index.values.get(key, []) if key is not None else []
            return bool(values) and all(
                v is not None and direct_reads(v, names=True) for v in values
            )
        return direct_reads(value, names=True)

    def _helper_mean_number(self, call: cst.Call) -> bool:
        """A local module's helper whose every return is a mean over what it is
        handed, read as a number (``HelperFact.batch_kind``: ``(output.argmax(1)
        == target).float().mean().item()``)."""
        helper = self.index.helper(call.func)
        return helper is not None and helper.batch_kind == "mean number"

    def _returned_form(self, call: cst.Call, depth: int) -> Form:
        """ "linear" when every return of the called function of this file is
        linear in batch means it computes itself (``return
        pred.eq(target).float().mean().item() * 100.0``), "opaque" when one is not,
        else "other"."""
        target = self.index.callee(call)
        if target is None or depth > 2:
            return "other"
        function = target[0]
        forms = {
            self.form(r.value, function, [], depth + 1)  # type: ignore[attr-defined]
            for r in findall(function.body, m.Return())
            if r.value is not None  # type: ignore[attr-defined]
        }
        if "linear" in forms and forms <= {"linear", "constant"}:
            return "linear"
        if forms & {"nonlinear", "opaque"}:
            return "opaque"
        return "other"

    def _returns_float(self, call: cst.Call) -> bool:
        """A function of this file whose every return is a Python number, also
        through math or NumPy (``return 10 * math.log10(1 / mse.item())``)."""
        returns = self._callee_returns(call)
        return bool(returns) and all(self._looks_float(r) for r in returns)

    def _callee_returns(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The values the function of this file that ``call`` runs returns (none
        for a call of anything else)."""
        target = self.index.callee(call)
        if target is None:
            return []
        return [
            r.value  # type: ignore[attr-defined]
            for r in findall(target[0].body, m.Return())
            if r.value is not None  # type: ignore[attr-defined]
        ]

    def _looks_float(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.BinaryOperation):
            sides = (value.left, value.right)
            return all(
                self._looks_float(v) or isinstance(v, (cst.Integer, cst.Float))
                for v in sides
            ) and not all(isinstance(v, (cst.Integer, cst.Float)) for v in sides)
        if isinstance(value, cst.Call) and any(
            n.startswith(("math.", "numpy.")) for n in self.index.qualnames(value.func)
        ):
            return True
        return is_number(value)


def direct_reads(value: cst.BaseExpression, names: bool = False) -> bool:
    """``loss.item()``, ``float(loss)``, and those plus, minus, times or over a
    number: forms the rule's ``global_loss`` rewrite wraps read by read. With
    ``names``, only ``+ - * /``, and a name or an attribute may stand beside a
    read as a number does (at least one read)."""
    if isinstance(value, cst.BinaryOperation):
        if names and not isinstance(
            value.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
        ):
            return False
        leaves = (
            (cst.Integer, cst.Float, cst.Name, cst.Attribute)
            if names
            else (
                cst.Integer,
                cst.Float,
            )
        )
        sides = (value.left, value.right)
        if not any(direct_reads(side, names) for side in sides):
            return False
        return all(
            direct_reads(side, names) or isinstance(side, leaves) for side in sides
        )
    return read_of(value) is not value


def is_number(value: cst.BaseExpression) -> bool:
    """``x.item()``, ``float(x)``, and those times, over, plus or minus a number."""
    if isinstance(value, (cst.Integer, cst.Float)):
        return True
    if isinstance(value, cst.BinaryOperation):
        return is_number(value.left) and is_number(value.right)
    return read_of(value) is not value
