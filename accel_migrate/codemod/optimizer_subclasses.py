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


def optimizer_bases(index: ModuleIndex) -> dict[cst.ClassDef, str]:
    """Each local optimizer class and the qualified name of the library
    optimizer it derives from (``torch.optim.SGD``), through local bases."""
    found: dict[cst.ClassDef, str] = {}
    changed = True
    while changed:
        changed = False
        for cls in index.classes:
            if cls in found:
                continue
            for base in cls.bases:
                local = index.local_class(base.value)
                names = sorted(
                    q for q in index.qualnames(base.value) if is_optimizer_base(q)
                )
                if local is not None and local in found:
                    found[cls] = found[local]
                elif local is None and names:
                    found[cls] = names[0]
                else:
                    continue
                changed = True
                break
    return found


def local_optimizer_classes(index: ModuleIndex) -> set[cst.ClassDef]:
    """The classes of ``optimizer_bases``."""
    return set(optimizer_bases(index))
