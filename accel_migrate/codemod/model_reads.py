"""Reads of a prepared model's parameters, buffers or outputs: possibly collective.

Under FSDP every parameter of a prepared model is a sharded ``DTensor``: a
read of a value (``float(model.weight[0, 0])``, ``model.fc.bias.tolist()``,
``model.weight.cpu()``, numpy conversion), a forward (``model(x)``) or a state
dict gathers the shards with a collective that every process must join. A
branch that only some processes take (``if rank == 0:``) and that reads one
hangs there, however harmless the read looks.

The fact is syntactic and errs towards a read: under ``node``, any attribute,
subscript or call whose receiver is a variable that may hold a prepared model
(``patterns.prepared_models``: ``model.weight``, ``model.fc.bias``,
``model.parameters()``, ``model.state_dict()``, ``model(x)``, ``model[0]``),
and the model handed to a function of the file or project (``report(model)``,
whose body may read it). The bare model as an argument of anything else
(``print(model)``, ``logger.info(model)``) is not a read: a module's ``repr``
prints its structure, no parameter value. A name bound to a parameter before
the branch (``w = model.weight`` then ``float(w[0, 0])`` under it) is not
followed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .patterns import prepared_models
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def model_read(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    """The first read of a prepared model's parameters, buffers or forward
    under ``node`` (see the module's docstring), or None."""
    if not prepared_models(index):
        return None
    for found in findall(node, m.Attribute() | m.Subscript() | m.Call()):
        if reads_in_chain(index, found):
            return found
    return None


def reads_in_chain(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Is ``node`` a read of a prepared model, or a chain of attributes and
    subscripts over one (``model[0].weight[0, 0]``)? Met in preorder, the
    whole chain comes before its innermost read (``model[0]``), so that a
    finding quotes what is read."""
    return reads_model(index, node) or reads_model(index, _chain_root(node))


def _chain_root(node: cst.CSTNode) -> cst.CSTNode:
    """The innermost attribute or subscript of the chain ``node`` ends
    (``model[0]`` of ``model[0].weight[0, 0]``)."""
    while isinstance(node, cst.Attribute | cst.Subscript) and isinstance(
        node.value, cst.Attribute | cst.Subscript
    ):
        node = node.value
    return node


def reads_model(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Is ``node`` itself (not what is under it) a read of a prepared model:
    ``model.weight``, ``model[0]``, ``model(x)``, ``report(model)`` of a
    function of the script or project?"""
    models = prepared_models(index)
    if not models:
        return False

    def is_model(expr: cst.CSTNode) -> bool:
        return isinstance(expr, cst.Name | cst.Attribute) and index.key(expr) in models

    if isinstance(node, cst.Attribute | cst.Subscript):
        return is_model(node.value)
    if not isinstance(node, cst.Call):
        return False
    if is_model(node.func):
        return True  # a forward: gathers every parameter under FSDP
    return (
        index.callee(node) is not None
        or index.local_function(node.func) is not None
        or index.helper(node.func) is not None
    ) and any(is_model(arg.value) for arg in node.args)
