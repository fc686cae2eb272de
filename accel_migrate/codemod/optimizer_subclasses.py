"""This module's optimizer classes: local classes deriving from a library
optimizer, directly or through local bases.

``class MySGD(torch.optim.SGD)`` (also ``class Base(torch.optim.SGD)`` and
``class MySGD(Base)``) builds an optimizer as ``torch.optim.SGD(...)`` does: its
qualified name is its library base's, read through the class chain. Before,
only subclasses of ``torch.optim.Optimizer`` itself were optimizers to AM004,
AM005, AM014 and AM031: ``MySGD(model.parameters(), lr=0.1)`` was left
unprepared. Schedulers (``torch.optim.lr_scheduler``) are not optimizers.
"""

from __future__ import annotations

import libcst as cst

from .analysis import ModuleIndex
from .names import is_optimizer_base


def local_optimizer_classes(index: ModuleIndex) -> set[cst.ClassDef]:
    """The module's classes deriving from a library optimizer, directly or
    through local bases."""
    return index.local_subclasses_where(is_optimizer_base)
