"""The local class an instance is made of, for calling its methods
(``ModuleIndex.local_function``): ``Trainer().fit(loader)``, or ``trainer =
Trainer(cfg)`` then ``trainer.fit(loader)``, where every value of the name is a
call of one class of the file. The method's parameters are then bound at the
call like a function's (a loader handed to ``fit`` is one in its loop)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def instance_class(index: ModuleIndex, expr: cst.BaseExpression) -> cst.ClassDef | None:
    if isinstance(expr, cst.Call):
        return index.local_class(expr.func)
    if not isinstance(expr, cst.Name):
        return None
    key = index.key(expr)
    values = index.values.get(key, []) if key is not None else []
    classes = {
        index.local_class(value.func) if isinstance(value, cst.Call) else None
        for value in values
    }
    if len(classes) != 1:
        return None
    return classes.pop()
