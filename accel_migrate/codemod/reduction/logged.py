"""What a logged loss needs to be combined like the original's: the token count
of an evaluation loss that is a mean over tokens.

``accel.global_loss(x)`` weighs each process's ``x`` by its share of the samples.
A loss given to ``accel.backward`` needs nothing more (the runtime combines it as
it was weighted there), but an evaluation loss that averages over the targets
that are not ``ignore_index`` is weighted by its own count of them:
``total += accel.global_loss(criterion(out, y), count=(y != PAD).sum()).item()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..patterns import strip_methods
from ..subtrees import findall
from . import loss_reduction

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


@dataclass(frozen=True)
class LoggedWeight:
    """``count``: the keyword to pass to the one ``global_loss`` call, or None;
    ``problem``: why the value cannot be combined like the original's, or ""."""

    count: cst.BaseExpression | None = None
    problem: str = ""


#: Methods from a tensor to a numpy array or Python values (the outermost call).
_TO_HOST = frozenset({"numpy", "tolist"})
#: Methods that keep a tensor's numbers (below such a call).
_SAME_NUMBERS = frozenset({"detach", "cpu", "cuda", "to", "float", "double", "clone"})


def host_copy_of(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor of ``loss.detach().cpu().numpy()`` (``loss``), or None when
    ``value`` does not end in ``.numpy()`` / ``.tolist()``: ``global_loss``
    takes the tensor, never the array."""
    if not m.matches(
        value, m.Call(func=m.Attribute(attr=m.OneOf(*map(m.Name, _TO_HOST))), args=[])
    ):
        return None
    return strip_methods(value.func.value, _SAME_NUMBERS)  # type: ignore[attr-defined]


def loss_leaves(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The tensors in ``value`` that a ``global_loss`` rewrite wraps: the receiver
    of ``.item()``, the argument of ``float()``, the tensor below ``.numpy()``
    (``host_copy_of``), each term of a sum, the loss side of a quotient or product
    (the same walk as the rewrite's)."""
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, (cst.Add, cst.Subtract)):
            return loss_leaves(value.left) + loss_leaves(value.right)
        if isinstance(value.operator, cst.Divide) or findall(value.left, m.Call()):
            return loss_leaves(value.left)
        return loss_leaves(value.right)
    if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[])):
        return [value.func.value]  # type: ignore[attr-defined]
    if m.matches(value, m.Call(func=m.Name("float"), args=[m.Arg(keyword=None)])):
        return [value.args[0].value]  # type: ignore[attr-defined]
    tensor = host_copy_of(value)
    return [value if tensor is None else tensor]


def logged_weight(
    index: ModuleIndex, value: cst.BaseExpression, at: cst.CSTNode
) -> LoggedWeight:
    """How the batch-mean losses ``value`` adds (at ``at``, original nodes) are
    weighted across processes, beyond the default mean over samples."""
    leaves = [leaf for leaf in loss_leaves(value) if not _backpropagated(index, leaf)]
    reductions = [loss_reduction(index, leaf, at) for leaf in leaves]
    tokens = [r for r in reductions if r.kind == "token-mean"]
    unknown = [r for r in reductions if r.kind == "unknown"]
    if unknown:
        return LoggedWeight(problem=unknown[0].reason)
    if not tokens:
        return LoggedWeight()
    if len(leaves) != 1 or tokens[0].count is None:
        reason = tokens[0].reason or (
            f"it adds means over {tokens[0].what} and other terms in one value"
        )
        return LoggedWeight(problem=reason)
    return LoggedWeight(count=tokens[0].count)


def _backpropagated(index: ModuleIndex, leaf: cst.BaseExpression) -> bool:
    """Is ``leaf`` a variable the file backpropagates (``loss.backward()`` or
    ``accel.backward(loss, ...)``)? The runtime then knows its weighting."""
    key = index.key(leaf) if isinstance(leaf, (cst.Name, cst.Attribute)) else None
    if key is None:
        return False
    for call in index.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            if not call.args and index.key(func.value) == key:
                return True
            if call.args and index.is_runtime_call(call, "backward"):
                first = call.args[0].value
                if isinstance(first, (cst.Name, cst.Attribute)):
                    if index.key(first) == key:
                        return True
    return False
