"""A loss times the batch size (``total += loss.item() * x.size(0)``): this
process's sum over its share only where the loss is a mean over the batch's
samples. AM009 reads it as a sum, and asks the loss reduction analysis (the
one AM007 and AM008 read) whether it is: where that calls the reduction
unknown (a mean of masked rows, written-out arithmetic of unproven rank) or a
mean over another count (tokens not ignored), AM009 says so, not "fixed". A
token mean times its own count (``loss.item() * lengths.sum().item()`` of a
loss divided by ``lengths.sum()``) is the share's sum of those tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..patterns import counts_samples
from ..reduction import loss_reduction
from ..reduction.placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


def scaled_loss(index: ModuleIndex, value: cst.BaseExpression) -> str:
    """Why ``value``, a loss times the batch size, is not this process's sum:
    the loss analysis's reason; "" where the loss is a batch mean, or
    ``value`` no such product of a variable (``loss.item()``; a call, as a
    metric helper's ``batch_accuracy(out, y)``, is read by its own facts)."""
    from .kinds import read_of

    value = read_of(value)
    if not (
        isinstance(value, cst.BinaryOperation)
        and isinstance(value.operator, cst.Multiply)
    ):
        return ""
    if counts_samples(index, value.left):
        loss, count = value.right, value.left
    elif counts_samples(index, value.right):
        loss, count = value.left, value.right
    else:
        return ""
    if not isinstance(read_of(loss), cst.Name | cst.Attribute):
        return ""
    found = loss_reduction(index, loss, loss)
    if found.kind == "unknown":
        return found.reason or "its reduction is not known"
    if found.kind == "token-mean":
        if found.count is not None and code(read_of(count)) == code(found.count):
            # `loss.item() * lengths.sum().item()` of a loss meaned over
            # `lengths.sum()`: times its own count, the share's sum of them
            return ""
        return f"it is a mean over {found.what}, not over the batch's samples"
    return ""
