"""Local ``torch.optim.Optimizer`` subclasses that are stand-ins, not optimizers.

``class DummyOptimizer(torch.optim.Optimizer)`` whose ``__init__`` sets
``self.param_groups = [{"lr": 0}]`` and never calls ``super().__init__(...)``
(harvardnlp's annotated-transformer hands one to its validation epoch so that
the same ``run_epoch`` serves both) holds no parameters: it steps nothing, and
the Optimizer machinery it skipped (its hooks, its ``state``) is missing, so
``accel.prepare_optimizer`` cannot take it (an AttributeError at the run).
AM005 leaves a stand-in's construction alone; an Optimizer subclass with no
``__init__`` of its own inherits its base's, which initialises it.
"""

from __future__ import annotations

import libcst as cst

from .analysis import ModuleIndex


def stand_in_optimizers(
    index: ModuleIndex, optimizer_classes: set[cst.ClassDef]
) -> set[cst.ClassDef]:
    """The classes of ``optimizer_classes`` (local Optimizer subclasses) whose
    ``__init__`` (their own, or the nearest local base's) never initialises
    the base class (no ``super().__init__(...)``, ``super(C, self).__init__(...)``
    or ``Base.__init__(self, ...)`` call in it)."""
    return {c for c in optimizer_classes if not _initialises_base(index, c, set())}


def _initialises_base(
    index: ModuleIndex, cls: cst.ClassDef, seen: set[cst.ClassDef]
) -> bool:
    seen.add(cls)
    init = next(
        (
            s
            for s in cls.body.body
            if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
        ),
        None,
    )
    if init is not None:
        return _calls_base_init(init)
    for base in cls.bases:
        local = index.local_class(base.value)
        if local is not None and local not in seen:
            return _initialises_base(index, local, seen)
    return True  # the library base's own __init__


def _calls_base_init(init: cst.FunctionDef) -> bool:
    found = False

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "__init__":
                found = True

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is init  # not the nested functions' calls

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

    init.visit(Visitor())
    return found
