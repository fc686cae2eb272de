"""A loss unpacked from a call of a callable handed in as a parameter.

``loss, loss_node = loss_compute(out, batch.tgt_y, batch.ntokens)`` in
harvardnlp's annotated-transformer ``run_epoch(data_iter, model,
loss_compute, ...)``: ``loss_compute`` is whatever the caller hands in (a
``SimpleLossCompute`` object whose ``__call__`` divides a summed KL divergence
by the batch's token count), so the reduction of the item backpropagated is not
read. Without this fact the reduction analysis took it for a mean over samples
(its default for a value it cannot follow) and AM007 weighed it so, with no
finding: the processes' token counts differ, and the averaged gradients were
not the original's. A model handed in (``logits, loss = model(x, y)``) is read
by ``forward.forward_loss_fact`` first and never reaches this.
"""

from __future__ import annotations

import libcst as cst

from ..analysis import ModuleIndex
from ..index_syntax import parameter_names
from .facts import code


def handed_callable(index: ModuleIndex, call: cst.Call) -> str | None:
    """Why the reduction of what ``call`` returns is not known, when ``call``
    calls a parameter of its enclosing function (None otherwise)."""
    func = call.func
    if not isinstance(func, cst.Name):
        return None
    function = index.enclosing_function(call)
    if function is None or func.value not in parameter_names(function):
        return None
    return (
        f"the loss is unpacked from `{code(call)}`, a call of `{func.value}`, a "
        f"callable handed to `{function.name.value}` as a parameter, whose "
        "reduction the analysis does not read (a loss-compute object dividing a "
        "sum by the batch's token count is a mean over tokens, whose count "
        "differs between the processes' shares)"
    )
