"""Local nn.Module classes that hold no parameter: a criterion that keeps only
buffers (DINO's ``DINOLoss``: ``register_buffer("center", ...)``, temperatures
and a numpy schedule), which AM004 does not prepare as a model where no
optimizer is built over it.

A prepared model exists to average its parameters' gradients; a module with
none has nothing to average (the runtime gives it no DDP wrapper), and calling
it a model misleads. Its buffer updates from each process's share of the batch
are AM032's to report. Static only: the class is read through libcst, once
per file (``ModuleIndex.parameterless_classes``).

A class counts only where every fact is plain: its only base is
``torch.nn.Module``; it defines ``__init__``; no statement of the class calls
``register_parameter``, ``register_module``, ``add_module``, ``nn.Parameter``,
``setattr`` or ``apply``; every attribute of ``self`` is set by a plain
``self.X = value`` (an unpacking ``self.w, self.b = ...``, an annotated
``self.fc: nn.Linear = ...`` or any other target naming ``self`` is not read);
and every ``self.X = <call>`` of its methods calls ``numpy``, a ``torch``
function outside ``torch.nn`` that builds no module (``torch.zeros``; not
``torch.hub``, ``torch.jit``, ``torch.load``, ``torch.compile``), or a Python
built-in; an attribute set from a value that calls nothing (``self.temp =
temp``, a parameter of any type) is never called nor the receiver of a call
in the class (``self.net = net`` then ``self.net(x)`` holds a module). Anything
else (a layer, a local function or class that may build one) is not read as
parameterless.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: Calls that may add a parameter or a submodule to the instance.
_ADDING = frozenset(
    {"register_parameter", "register_module", "add_module", "setattr", "apply"}
)
#: Prefixes of calls whose value is no module nor parameter.
_PLAIN_PREFIXES = ("numpy.", "builtins.", "math.")
#: ``torch`` calls that may hand back a module (a loaded or compiled one).
_MODULE_MAKERS = (
    "torch.nn.",
    "torch.hub.",
    "torch.jit.",
    "torch.load",
    "torch.compile",
    "torch.fx.",
    "torch.export.",
    "torch.package.",
)
#: Statements whose target may bind an attribute of ``self``.
_BINDINGS = m.Assign() | m.AnnAssign() | m.AugAssign() | m.For() | m.WithItem()
_SELF_ATTRIBUTE = m.Attribute(value=m.Name("self"))


def parameterless_class(
    index: ModuleIndex, cls: cst.ClassDef, needs_init: bool = True
) -> bool:
    """Is ``cls`` (a class of this file) an nn.Module that holds no parameter,
    as the module docstring reads it? ``needs_init=False`` also takes a class
    with no ``__init__`` (a loss module with only a ``forward``: nothing of it
    can hold a parameter), which AM037 reads as a criterion, not a model."""
    if len(cls.bases) != 1 or "torch.nn.Module" not in index.qualnames(
        cls.bases[0].value
    ):
        return False
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]
    if needs_init and not any(f.name.value == "__init__" for f in methods):
        return False
    for call in findall(cls, m.Call()):
        assert isinstance(call, cst.Call)
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else ""
        if isinstance(func, cst.Name):
            name = func.value
        if name in _ADDING or name == "Parameter":
            return False
    for statement in findall(cls, _BINDINGS):
        targets = _targets(statement)
        if any(_hidden_self(t) for t in targets):
            return False  # `self.w, self.b = ...`
        if not any(m.matches(t, _SELF_ATTRIBUTE) for t in targets):
            continue
        if isinstance(statement, cst.AnnAssign):
            return False  # `self.fc: nn.Linear = nn.Linear(d, n)`
        value = getattr(statement, "value", None)
        if value is None:
            return False  # `for self.x in ...`, `with ... as self.x`
        for call in findall(value, m.Call()):
            assert isinstance(call, cst.Call)
            if not _plain(index, call):
                return False
        if not findall(value, m.Call()) and _called(cls, targets):
            return False  # `self.net = net` then `self.net(x)`: a module held
    return True


def _targets(statement: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(statement, cst.Assign):
        return [t.target for t in statement.targets]
    if isinstance(statement, cst.WithItem):
        return [statement.asname.name] if statement.asname is not None else []
    return [statement.target]  # type: ignore[attr-defined]


def _hidden_self(target: cst.BaseExpression) -> bool:
    """Does ``target`` bind an attribute of ``self`` other than by a plain
    ``self.X =`` (an unpacking, an annotated assignment)?"""
    if m.matches(target, _SELF_ATTRIBUTE):
        return False
    return bool(findall(target, m.Name("self")))


def _called(cls: cst.ClassDef, targets: list[cst.BaseExpression]) -> bool:
    """Is an attribute ``assign`` sets on ``self`` from a value that calls
    nothing (``self.net = net``, a parameter of any type) called in the class,
    or the receiver of a call (``self.net(x)``, ``self.net.encode(x)``)?"""
    names = {t.attr.value for t in targets if isinstance(t, cst.Attribute)}
    for call in findall(cls, m.Call()):
        assert isinstance(call, cst.Call)
        func = call.func
        while isinstance(func, cst.Attribute):
            if m.matches(func.value, m.Name("self")) and func.attr.value in names:
                return True
            func = func.value
    return False


def _plain(index: ModuleIndex, call: cst.Call) -> bool:
    names = index.qualnames(call.func)
    return bool(names) and all(
        n.startswith(_PLAIN_PREFIXES)
        or (n.startswith("torch.") and not n.startswith(_MODULE_MAKERS))
        for n in names
    )
