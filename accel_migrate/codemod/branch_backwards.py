"""A logged loss read where its backward may not have run.

codertimo/BERT-pytorch's ``BERTTrainer.iteration(epoch, loader, train=True)``
serves both passes: ``loss`` is computed every batch, backpropagated only
under ``if train:``, and read after that branch (``avg_loss += loss.item()``).
AM008 makes the read ``accel.global_loss(loss)``, which combines a loss given to
``accel.backward`` as it was weighted there (``count=`` of a masked-token mean);
in the test pass no backward ran, and the runtime would take the loss for a
mean over samples. The read then needs the backward's keywords itself.

``under_other_branch`` says whether a backward of the loss's variable runs
under an ``if``/``else`` that does not hold the read, inside the loop that
holds both. Static only.
"""

from __future__ import annotations

import libcst as cst

from .analysis import Key, ModuleIndex
from .returned_loss import backpropagated


def under_other_branch(index: ModuleIndex, key: Key, read: cst.CSTNode) -> bool:
    """Is a backward of ``key`` made under a branch that ``read`` is not in?"""
    around_read = set(map(id, index.ancestors(read)))
    for call in index.calls:
        if not any(index.key(each) == key for each in backpropagated(index, call)):
            continue
        for ancestor in index.ancestors(call):
            if id(ancestor) in around_read:
                break  # reached what holds both: the same branch
            if isinstance(ancestor, (cst.If, cst.Else)):
                return True
    return False
