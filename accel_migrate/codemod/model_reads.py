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
prints its structure, no parameter value. A name bound to a parameter or a
submodule (``w = model.weight``, ``head = model.fc``: ``model_tensors``) is
read as the model is, and handed to any call (``float(w)``) it is read.

Not a read: a parameter's size or other metadata (``model.weight.shape``,
``model.fc.weight.numel()``, ``sum(p.numel() for p in model.parameters())``,
``for p in model.parameters(): n += p.numel()``). A sharded parameter is a
``DTensor`` whose ``shape``, ``size()`` and ``numel()`` are the whole
parameter's, read from its metadata on every process without a collective
(the same number on every process, sharded or not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import libcst as cst
import libcst.matchers as m

from .patterns import prepared_models
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .index_syntax import Key

#: A tensor's metadata, read without a collective also when it is a DTensor.
META_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "device", "requires_grad"})
META_METHODS = frozenset({"numel", "nelement", "size", "dim", "ndimension"})
#: A module's methods that yield its parameters or buffers (no value read).
_ITERATORS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers"})


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

    tensors = model_tensors(index)

    def is_model(expr: cst.CSTNode) -> bool:
        return isinstance(expr, cst.Name | cst.Attribute) and (
            index.key(expr) in models or index.key(expr) in tensors
        )

    if isinstance(node, cst.Attribute | cst.Subscript):
        return is_model(node.value) and not size_only(index, node)
    if not isinstance(node, cst.Call):
        return False
    if is_model(node.func):
        return True  # a forward: gathers every parameter under FSDP
    if any(
        isinstance(arg.value, cst.Name | cst.Attribute)
        and index.key(arg.value) in tensors
        for arg in node.args
    ):
        return True  # `float(w)` of `w = model.weight`
    return (
        index.callee(node) is not None
        or index.local_function(node.func) is not None
        or index.helper(node.func) is not None
    ) and any(is_model(arg.value) for arg in node.args)


def model_tensors(index: ModuleIndex) -> frozenset[Key]:
    """Variables bound to a prepared model's parameter, buffer or submodule
    (``w = model.weight``, ``head = model.module.fc``): an attribute chain
    over the model, not one of its metadata (``model.weight.shape``)."""
    cached = _TENSORS.get(index)
    if cached is None:
        models = prepared_models(index)

        def seed(expr: cst.BaseExpression) -> bool:
            if not isinstance(expr, cst.Attribute) or not models:
                return False
            root: cst.BaseExpression = expr
            while isinstance(root, cst.Attribute):
                if root.attr.value in META_ATTRIBUTES | META_METHODS | _ITERATORS:
                    return False
                root = root.value
                if isinstance(root, cst.Name | cst.Attribute) and (
                    index.key(root) in models
                ):
                    return True
            return False

        cached = _TENSORS[index] = frozenset(index.tagged(seed) - models)
    return cached


_TENSORS: WeakKeyDictionary[ModuleIndex, frozenset[Key]] = WeakKeyDictionary()


def size_only(index: ModuleIndex, read: cst.CSTNode) -> bool:
    """Does the model read ``read`` (``model.weight``, ``model.parameters``)
    only reach its tensors' metadata: ``model.weight.shape``,
    ``model.fc.weight.numel()``, ``p.numel() for p in model.parameters()``?"""
    if isinstance(read, cst.Attribute) and _metadata(index, read):
        return True  # `w.shape` of `w = model.weight`
    node = read
    parent = index.parent(node)
    while isinstance(parent, cst.Attribute) and parent.value is node:
        if _metadata(index, parent):
            return True
        node, parent = parent, index.parent(parent)
    if not (
        isinstance(node, cst.Attribute)
        and node.attr.value in _ITERATORS
        and isinstance(parent, cst.Call)
        and parent.func is node
    ):
        return False
    holder = index.parent(parent)
    if isinstance(holder, cst.CompFor) and holder.iter is parent:
        comprehension = index.parent(holder)
        if not isinstance(comprehension, cst.GeneratorExp | cst.ListComp | cst.SetComp):
            return False
        uses = [comprehension.elt, *(c.test for c in holder.ifs)]
        return holder.inner_for_in is None and _items_sized(
            index, holder.target, node.attr.value, uses
        )
    if isinstance(holder, cst.For) and holder.iter is parent:
        return _items_sized(index, holder.target, node.attr.value, [holder.body])
    return False


def _metadata(index: ModuleIndex, node: cst.Attribute) -> bool:
    """``x.shape``, ``x.dtype``; ``x.numel``, ``x.size`` called."""
    if node.attr.value in META_ATTRIBUTES:
        return True
    call = index.parent(node)
    return (
        node.attr.value in META_METHODS
        and isinstance(call, cst.Call)
        and call.func is node
    )


def _items_sized(
    index: ModuleIndex, target: cst.BaseExpression, method: str, uses: list
) -> bool:
    """Is every use, under ``uses``, of the tensors a loop over
    ``model.<method>()`` binds to ``target`` a read of their metadata? (The
    name of ``named_parameters()``'s pairs is a string: any use.)"""
    if isinstance(target, cst.Name):
        tensor = target.value
    elif (
        method.startswith("named")
        and isinstance(target, cst.Tuple)
        and len(target.elements) == 2
        and isinstance(target.elements[1].value, cst.Name)
    ):
        tensor = target.elements[1].value.value  # type: ignore[union-attr]
    else:
        return False
    for use in uses:
        for name in findall(use, m.Name(tensor)):
            parent = index.parent(name)
            if not (
                isinstance(parent, cst.Attribute)
                and parent.value is name
                and _metadata(index, parent)
            ):
                return False
    return True
