"""The settings of a loss module built elsewhere than where it is called.

pytorch seq2seq tutorials build ``criterion = nn.CrossEntropyLoss(ignore_index=
pad_idx)`` in ``main()`` and hand it to ``train(model, loader, optimizer,
criterion, epoch)``; trainers keep ``nn.CrossEntropyLoss(weight=class_weights)``
as ``self.criterion``. The count that weighs such a mean across processes
(``(target != ignore_index).sum()``, ``accel.class_weight_count(weight, target)``)
is written where the loss is backpropagated, where ``main()``'s ``pad_idx`` or
``class_weights`` are not defined. A ``torch.nn`` loss module keeps them as
attributes (``criterion.ignore_index``, ``criterion.weight``), read at the call
like its targets; a setting written with the module's own names (``PAD_IDX``,
a literal) is kept as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..batch_rows import batch_values
from ..index_syntax import variable_names
from ..scopes import GlobalScope

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: The keywords of a ``torch.nn`` loss module kept as attributes of the same name.
_HELD = ("ignore_index", "weight")


def held_settings(
    index: ModuleIndex, keywords: dict, criterion: cst.BaseExpression
) -> dict:
    """``keywords`` of the module ``criterion`` holds, each of ``_HELD`` that is
    not written with module-level names read off ``criterion`` instead."""
    local = batch_values(index)
    found = dict(keywords)
    for name in _HELD:
        value = keywords.get(name)
        if value is None or _module_level(index, value):
            continue
        if any(index.key(n) in local for n in variable_names(value)):
            continue  # weights of a batch's share: the weighted-mean rule says so
        found[name] = cst.Attribute(value=criterion.deep_clone(), attr=cst.Name(name))
    return found


def read_off(value: cst.BaseExpression, criterion: cst.BaseExpression | None) -> bool:
    """Is ``value`` a setting read off ``criterion`` (``criterion.ignore_index``)?
    Its names are then the call's own, like the targets'."""
    return (
        criterion is not None
        and isinstance(value, cst.Attribute)
        and value.attr.value in _HELD
        and value.value.deep_equals(criterion)
    )


def _module_level(index: ModuleIndex, value: cst.BaseExpression) -> bool:
    """Does ``value`` read only module-level names (or none: a literal)?"""
    for name in variable_names(value):
        key = index.key(name)
        if key is None or not isinstance(key[0], GlobalScope):
            return False
    return True
