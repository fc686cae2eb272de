"""A loss class of this file with no call of its own: ``class RelL2(LpLoss)``
in the script, whose ``__init__`` calls ``super().__init__(size_average=False)``
of the ``LpLoss`` it imports from utilities3.py, then ``myloss = RelL2()``.

The project view reads the classes of the other modules
(``inherited_reductions``); a class of the script itself is read here the same
way, on its own tree: its bases each read as the project view's fact of an
imported class, as this file's class (itself read with its own bases, a few
levels), or by the library name it resolves to. The fact it makes
(``call_reduction``, ``setting_reductions``) is then read as one of the
project view's (``called_criteria``), the construction picking the paths; a
write of a setting in this file unsettles it there. Static only.
"""

from __future__ import annotations

import ast
import textwrap
from typing import TYPE_CHECKING

import libcst as cst

from .. import python_ast
from ..inherited_reductions import (
    PLAIN,
    BaseReading,
    class_call_reductions,
    entry_method,
    library_base,
)
from ..names import MODULE_BASES, is_nn_module_constructor
from ..project_facts import HelperFact
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

_DEPTH = 4


def script_subclass(index: ModuleIndex, func: cst.BaseExpression) -> HelperFact | None:
    """The fact of the class of this file ``func`` names, where it defines no
    call of its own and derives from another class; None otherwise (a class
    with its own ``forward`` is ``local_criteria``'s)."""
    cls = index.local_class(func)
    if cls is None or not cls.bases or _entry(cls):
        return None
    reading = _reading(index, cls, 0)
    if reading is None or isinstance(reading, str):
        return None
    reduction, settings = reading
    return HelperFact(
        cls.name.value,
        "this file",
        "class",
        call_reduction=reduction,
        setting_reductions=settings,
    )


def _entry(cls: cst.ClassDef) -> bool:
    return any(
        isinstance(s, cst.FunctionDef) and s.name.value in ("forward", "__call__")
        for s in cls.body.body
    )


def _reading(index: ModuleIndex, cls: cst.ClassDef, depth: int) -> BaseReading:
    """``cls``'s (call_reduction, setting_reductions), read on its own code
    with its bases'; None where its code cannot be read."""
    try:
        tree = python_ast.parse(textwrap.dedent(code(cls)))
    except SyntaxError:
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.ClassDef):
        return None
    bases: list[tuple[str, BaseReading]] = []
    if not entry_method(node):
        model = any(_model_base(index, arg.value) for arg in cls.bases)
        for arg in cls.bases:
            reading = _base(index, arg.value, depth)
            if reading is None and model and index.local_class(arg.value) is None:
                reading = PLAIN  # a model's library base says nothing
            bases.append((code(arg.value), reading))
    found = class_call_reductions(node, None, bases)
    return (found["call_reduction"], found["setting_reductions"])  # type: ignore[return-value]


def _base(index: ModuleIndex, base: cst.BaseExpression, depth: int) -> BaseReading:
    if isinstance(base, cst.Subscript):
        base = base.value  # `Generic[T]`
    local = index.local_class(base)
    if local is not None:
        return _reading(index, local, depth + 1) if depth < _DEPTH else None
    helper = index.helper(base)
    if helper is not None:
        if helper.kind != "class":
            return None
        return (helper.call_reduction, helper.setting_reductions)
    names = index.qualnames(base)
    if not names:
        return None
    readings = {library_base(name) for name in names}
    return PLAIN if readings == {PLAIN} else None


def _model_base(index: ModuleIndex, base: cst.BaseExpression) -> bool:
    """Is ``base`` torch's ``nn.Module``, a torch module class, or a model
    class of a local module?"""
    helper = index.helper(base)
    if helper is not None:
        return helper.returns == "model"
    return any(
        name in MODULE_BASES or is_nn_module_constructor(name)
        for name in index.qualnames(base)
    )
