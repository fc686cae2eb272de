"""How a value of the batch that is not the loss reduces it: a printed accuracy or
token count.

``print(f"acc {acc.item():.3f} tokens {ntokens.item()}")`` in a training loop shows
this process's share of the batch once the loader is sharded. To print what the
original printed, the value must be combined across processes as it reduces its
batch: a mean over samples (``(out.argmax(1) == y).float().mean()``) is weighted
by each share's size, a sum (``tgt.ne(PAD).sum()``) is summed. Unlike a loss, a
value for which nothing says how it reduces is not taken for a mean over samples:
``out[0, 0].item()`` or ``out.max().item()`` would be wrong weighted so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import LossReduction, _Reducer, _unplaceable
from .facts import code
from .placement import placement_blocker

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


def batch_value_reduction(
    index: ModuleIndex, value: cst.BaseExpression, at: cst.CSTNode
) -> LossReduction:
    """The reduction of the batch value ``value`` (original tree) read at ``at``:
    "mean", "sum" or "token-mean" only where an explicit reduction of the batch
    says so, else "unknown" with the reason."""
    fact = _Reducer(index).fact(value, at, 0)
    if fact.kind in ("mean", "sum"):
        return LossReduction(fact.kind, what=fact.what)
    if fact.kind == "token-mean":
        if fact.count is None or fact.anchor is None:
            return LossReduction("unknown", fact.reason or _unplaceable(fact))
        blocker = placement_blocker(index, fact.count, fact.anchor, at)
        if blocker is not None:
            return LossReduction("unknown", f"{_unplaceable(fact)} ({blocker})")
        return LossReduction("token-mean", count=fact.count.deep_clone())
    op = _extreme(index, value)
    if op:
        largest = "largest" if op == "max" else "smallest"
        return LossReduction(
            "unknown", f"`{code(value)}` is the {largest} value of the batch", op=op
        )
    return LossReduction(
        "unknown",
        fact.reason
        or f"the rule cannot tell `{code(value)}` a mean or a sum over the batch",
    )


def _extreme(index: ModuleIndex, value: cst.BaseExpression) -> str:
    """ "max" or "min" for the whole tensor's maximum or minimum (``x.max()``,
    ``torch.max(x)``: no dimension), else ""."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        name = value.func.attr.value
        if name not in ("max", "min"):
            return ""
        qualified = index.qualnames(value.func) & {f"torch.{name}"}
        return name if len(value.args) == (1 if qualified else 0) else ""
    return ""
