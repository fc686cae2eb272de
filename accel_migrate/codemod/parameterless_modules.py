"""Local nn.Module classes that hold no parameter: a criterion that keeps only
buffers (DINO's ``DINOLoss``: ``register_buffer("center", ...)``, temperatures
and a numpy schedule), which AM004 does not prepare as a model where no
optimizer is built over it.

A prepared model exists to average its parameters' gradients; a module with
none has nothing to average (the runtime gives it no DDP wrapper), and calling
it a model misleads. Its buffer updates from each process's share of the batch
are AM032's to report. Static only: the class is read through libcst.

A class counts only where every fact is plain: its only base is
``torch.nn.Module``; it defines ``__init__``; no statement of the class calls
``register_parameter``, ``add_module``, ``nn.Parameter``, ``setattr`` or
``apply``; and every ``self.X = <call>`` of its methods calls ``numpy``, a
``torch`` function outside ``torch.nn`` (``torch.zeros``), or a Python
built-in; an attribute set from a value that calls nothing (``self.temp =
temp``, a parameter of any type) is never called nor the receiver of a call
in the class (``self.net = net`` then ``self.net(x)`` holds a module). Anything
else (a layer, a local function or class that may build one) is not read as
parameterless.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex
from .subtrees import findall

#: Calls that may add a parameter or a submodule to the instance.
_ADDING = frozenset({"register_parameter", "add_module", "setattr", "apply"})
#: Prefixes of calls whose value is no module nor parameter.
_PLAIN_PREFIXES = ("numpy.", "builtins.", "math.")


def parameterless_class(index: ModuleIndex, cls: cst.ClassDef) -> bool:
    """Is ``cls`` (a class of this file) an nn.Module that holds no parameter,
    as the module docstring reads it?"""
    if len(cls.bases) != 1 or "torch.nn.Module" not in index.qualnames(
        cls.bases[0].value
    ):
        return False
    methods = [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]
    if not any(f.name.value == "__init__" for f in methods):
        return False
    for call in findall(cls, m.Call()):
        assert isinstance(call, cst.Call)
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else ""
        if isinstance(func, cst.Name):
            name = func.value
        if name in _ADDING or name == "Parameter":
            return False
    for assign in findall(cls, m.Assign()):
        assert isinstance(assign, cst.Assign)
        if not any(
            m.matches(t.target, m.Attribute(value=m.Name("self")))
            for t in assign.targets
        ):
            continue
        for call in findall(assign.value, m.Call()):
            assert isinstance(call, cst.Call)
            if not _plain(index, call):
                return False
        if not findall(assign.value, m.Call()) and _called(cls, assign):
            return False  # `self.net = net` then `self.net(x)`: a module held
    return True


def _called(cls: cst.ClassDef, assign: cst.Assign) -> bool:
    """Is an attribute ``assign`` sets on ``self`` from a value that calls
    nothing (``self.net = net``, a parameter of any type) called in the class,
    or the receiver of a call (``self.net(x)``, ``self.net.encode(x)``)?"""
    names = {
        t.target.attr.value
        for t in assign.targets
        if isinstance(t.target, cst.Attribute)
    }
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
        or (n.startswith("torch.") and not n.startswith("torch.nn."))
        for n in names
    )
