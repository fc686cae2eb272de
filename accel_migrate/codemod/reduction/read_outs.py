"""A loss variable rebound to a read-out of itself (``loss =
loss.detach().cpu().numpy()``, ``loss = loss.item()``, ``loss =
float(loss)``), as powerful-gnns' ``train()`` does after the backward to sum
the epoch's loss. The value is the same loss as a number or a detached
tensor: no other reduction of it, so the reduction analysis does not weigh
it against the loss's own (AM007 had said "`loss` is assigned losses of
different reductions")."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex

#: Methods that read a tensor out without changing its value.
_READ_METHODS = frozenset({"detach", "cpu", "numpy", "item", "tolist", "clone"})
#: Builtins that read a one-element tensor out as a number.
_READ_BUILTINS = frozenset({"float"})
#: Attributes that read a tensor out (``loss.data``).
_READ_ATTRIBUTES = frozenset({"data"})


def read_out(index: ModuleIndex, value: cst.BaseExpression, key: Key) -> bool:
    """Is ``value`` a read-out of the variable ``key`` itself (a chain of
    ``_READ_METHODS`` calls and ``.data`` on it, or ``float(...)`` of one)?"""
    node: cst.BaseExpression = value
    steps = 0
    while True:
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in _READ_METHODS:
                if node.args:
                    return False
                node = func.value
            elif (
                isinstance(func, cst.Name)
                and func.value in _READ_BUILTINS
                and len(node.args) == 1
                and node.args[0].keyword is None
                and not node.args[0].star
            ):
                node = node.args[0].value
            else:
                return False
        elif isinstance(node, cst.Attribute) and node.attr.value in _READ_ATTRIBUTES:
            node = node.value
        elif isinstance(node, cst.Name):
            return steps > 0 and index.key(node) == key
        else:
            return False
        steps += 1
