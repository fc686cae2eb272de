"""Values the script reads off an instance of a local module's class that AM017
would make on the main process only.

``accel.on_main_process(EarlyStopping, patience=20)`` hands the other processes
a stand-in that accepts every call and answers every attribute read with
itself, which is true. Where the script only calls the object for its writes
(a logger), that is right. Where it reads a value off it, the other processes
get the stand-in instead: jhhuang96/ConvLSTM-PyTorch's ``EarlyStopping`` saves
in a method (writes and prints, nothing else), and the loop then tests ``if
early_stopping.early_stop: break``, true at once on every other process, which
left the loop while the main process trained on (a collective timeout). The
same object handed to a function that tests it (``fit(..., early_stopping)``
then ``if stopper.early_stop: break``), or stored on ``self`` and read there,
hangs alike: ``instance_leaves`` tells where the object leaves its name, and
AM017 then keeps it on every process too. Static only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .reduction.placement import code
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def instance_value_read(index: ModuleIndex, call: cst.Call) -> str:
    """The first value the script reads off the instance ``call`` builds
    (``name = Class(...)``): an attribute read that is not a method call
    (``early_stopping.early_stop``), or a method call whose result is used
    (``stop = stopper.step(loss)``), as ``"`...`"``; "" where none is (or the
    instance is not bound to one name)."""
    parent = index.parent(call)
    if not (
        isinstance(parent, cst.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
    ):
        return ""
    key = index.key(parent.targets[0].target)
    if key is None:
        return ""
    name = parent.targets[0].target.value
    for attribute in findall(index.module, m.Attribute(value=m.Name(name))):
        assert isinstance(attribute, cst.Attribute)
        if index.key(attribute.value) != key:
            continue
        outer = index.parent(attribute)
        if isinstance(outer, cst.AssignTarget) or (
            isinstance(outer, cst.AugAssign) and outer.target is attribute
        ):
            continue  # a write: the stand-in takes it
        if isinstance(outer, cst.Call) and outer.func is attribute:
            if isinstance(index.parent(outer), cst.Expr):
                continue  # a call for its effect
            return f"`{code(outer)}`"
        return f"`{code(attribute)}`"
    for use in findall(index.module, m.Call(func=m.Name(name))):
        assert isinstance(use, cst.Call)
        if index.key(use.func) == key and not isinstance(index.parent(use), cst.Expr):
            return f"`{code(use)}`"  # `if stopper(val_loss):`
    return ""


def instance_leaves(index: ModuleIndex, call: cst.Call) -> str:
    """Where the instance ``call`` builds leaves the one name it is bound to, so
    that its reads are not all in sight of ``instance_value_read``: built
    anywhere but ``name = Class(...)`` or a bare statement (``self.stopper =
    Class(...)``, ``fit(..., Class(...))``, ``return Class(...)``), or its name
    read other than for an attribute or a call of it (an argument
    ``fit(model, early_stopping)``, a container, an attribute store, another
    name), as ``"`...`"``; "" where it does not."""
    parent = index.parent(call)
    if isinstance(parent, cst.Expr):
        return ""
    if not (
        isinstance(parent, cst.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
    ):
        return f"`{_short(code(_statement(index, call)))}`"
    target = parent.targets[0].target
    key = index.key(target)
    if key is None:
        return f"`{_short(code(parent))}`"
    for use in findall(index.module, m.Name(target.value)):
        assert isinstance(use, cst.Name)
        if use is target or index.key(use) != key:
            continue
        outer = index.parent(use)
        if isinstance(outer, cst.Attribute) and outer.value is use:
            continue  # `early_stopping.early_stop`: instance_value_read's
        if isinstance(outer, cst.Call) and outer.func is use:
            continue  # `early_stopping(val_loss, ...)`
        if isinstance(outer, (cst.AssignTarget, cst.Del)):
            continue  # a rebinding of the name, not a read of the object
        if isinstance(outer, cst.Arg):
            outer = index.parent(outer) or outer
        return f"`{_short(code(outer))}`"
    return ""


def _statement(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode:
    """The small statement (or compound statement's header) holding ``node``."""
    while True:
        parent = index.parent(node)
        if parent is None or isinstance(node, cst.BaseSmallStatement):
            return node
        if isinstance(parent, cst.BaseCompoundStatement):
            return node
        node = parent


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."
