"""An item unpacked from what a function of another local module returns.

``loss, loss_components = compute_loss(outputs, targets, model)``, with
``compute_loss`` in utils/loss.py (PyTorch-YOLOv3) ending ``return loss,
to_cpu(torch.cat((lbox, lobj, lcls, loss)))``: the loss's reduction is the one
the project view reads at that position of the returned tuple
(``HelperFact.tuple_loss``). Where the view reads no loss there (YOLO's ``loss =
lbox + lobj + lcls`` of terms started as ``torch.zeros(1)`` and grown with
``+=``, its box term a mean over the targets matched to anchors), the reduction
is not known: neither a mean over samples nor a sum can be assumed, and the
backward is reported (before, such an item was taken for a per-sample mean and
weighed as one, silently).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .facts import Fact
from .summed_args import unproven_sum

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


def imported_item_fact(
    index: ModuleIndex, call: cst.Call, position: int, length: int, name: str
) -> Fact | None:
    """The fact of item ``position`` of ``length`` unpacked from ``call``, a call
    of a plain function of another local module; None where ``call`` is not one
    (the caller's default holds)."""
    helper = index.helper(call.func)
    if helper is None or helper.kind != "function" or helper.returns:
        return None
    loss = helper.tuple_loss
    if loss is None or (loss.position, loss.length) != (position, length):
        return Fact(
            "unknown",
            f"`{name}` is item {position} of the {length} values {helper.where} "
            "returns, whose reduction over the batch (a mean over its samples, a "
            "sum, or a mean over some other count such as matched targets or "
            "tokens) the analysis cannot read there",
        )
    if loss.reduction == "mean":
        return Fact("mean")
    if loss.reduction == "none":
        # a per-sample item (`reduction="none"`): `.mean()` of it is a mean
        return Fact(
            "elements",
            reason=f"`{name}` is item {position} of what {helper.where} returns, "
            "a per-sample loss (reduction='none') not reduced over the batch here",
        )
    if loss.reduction == "sum":
        unbound = unproven_sum(index, helper, call)
        return Fact("unknown", unbound) if unbound else Fact("sum", what=helper.where)
    return Fact(
        "unknown",
        f"`{name}` is item {position} of what {helper.where} returns, a loss "
        f"of reduction `{loss.reduction}` whose count cannot be written here",
    )
