"""Buffers made with the configured batch size before a step and filled in place in it.

The Variable-era DCGAN makes ``label = torch.FloatTensor(opt.batchSize)`` once,
then fills it every step (``label.data.resize_(batch_size).fill_(1)``). After
migration each process's batch is its share of the global batch: a resize
through ``.data`` resizes another tensor object, so the buffer keeps the
configured size and part of it is never filled. AM025 (batch-size shapes)
reports such a buffer from these facts: the name it is made into
(``assigned_name``), the calls that fill it in a loop over a prepared loader
(``buffer_fills``), and whether every such loop first resizes the tensor itself
to the batch (``resized_first``), after which its first size no longer matters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex


#: In-place methods that fill (or resize) a tensor: a buffer a step fills.
RESIZES = frozenset({"resize_", "resize_as_"})
FILLS = RESIZES | frozenset(
    {"copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_"}
)

#: Calls that wrap a tensor without changing its size.
_WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def assigned_name(index: ModuleIndex, call: cst.Call) -> cst.Name | None:
    """``x`` of ``x = torch.FloatTensor(n, ...)`` (also with methods after the
    call, ``x = torch.FloatTensor(n).cuda()``, or wrapped, ``x =
    Variable(torch.FloatTensor(n))``); None for any other use."""
    node: cst.CSTNode = call
    parent = index.parent(node)
    while True:
        if isinstance(parent, cst.Attribute) and parent.value is node:
            outer = index.parent(parent)
            if not isinstance(outer, cst.Call) or outer.func is not parent:
                return None
        elif isinstance(parent, cst.Arg) and parent.keyword is None:
            # `Variable(torch.FloatTensor(n))`: the same buffer, wrapped
            outer = index.parent(parent)
            if not (
                isinstance(outer, cst.Call)
                and len(outer.args) == 1
                and index.qualnames(outer.func) & _WRAPPERS
            ):
                return None
        else:
            break
        node, parent = outer, index.parent(outer)
    if (
        isinstance(parent, cst.Assign)
        and parent.value is node
        and len(parent.targets) == 1
        and isinstance(parent.targets[0].target, cst.Name)
    ):
        return parent.targets[0].target
    return None


def buffer_fills(
    index: ModuleIndex,
    key: Key,
    enclosing_loops: Callable[[cst.CSTNode], list[tuple[cst.For, Any]]],
) -> list[tuple[cst.Call, cst.For]]:
    """The calls that fill or resize the buffer ``key`` in place (on it or on
    its ``.data``) in a loop over a prepared loader (``enclosing_loops``: the
    rule's, innermost first), with that loop."""
    found = []
    for call in index.calls:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in FILLS:
            continue
        receiver = func.value
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
            receiver = receiver.value
        if not isinstance(receiver, cst.Name) or index.key(receiver) != key:
            continue
        loops = enclosing_loops(call)
        if loops:
            found.append((call, loops[0][0]))  # the innermost
    return found


def resized_first(
    index: ModuleIndex,
    loop: cst.For,
    key: Key,
    configured_size: Callable[[cst.Call], bool],
) -> bool:
    """Is the first use of the buffer ``key`` in ``loop`` a resize of the
    tensor itself to something other than a configured batch size
    (``x.resize_as_(batch)``, ``x.resize_(batch_size, nz)`` with
    ``batch_size = batch.size(0)``), in a statement every iteration runs?
    (``configured_size``: does a resize call take a configured batch size.)"""
    first = next(
        (
            name
            for name in findall(loop.body, m.Name())
            if index.key(name) == key  # type: ignore[arg-type]
        ),
        None,
    )
    if first is None:
        return False
    attribute = index.parent(first)
    call = index.parent(attribute) if attribute is not None else None
    if not (
        isinstance(attribute, cst.Attribute)
        and attribute.value is first
        and attribute.attr.value in RESIZES
        and isinstance(call, cst.Call)
        and call.func is attribute
        and call.args
    ):
        return False
    if configured_size(call):
        return False
    for ancestor in index.ancestors(call):
        if ancestor is loop:
            return True
        if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try)):
            return False  # not run in every iteration (or not first)
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return False
    return False
