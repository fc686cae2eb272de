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

A GAN's targets made once with the configured batch size (``y_real =
torch.ones(opt.batch_size, 1)``, ``valid = torch.full((batch_size,), 1.0)``)
and used as they are in every step's loss against the discriminator's output
for the process's share are the same defect without a fill: ``step_uses``
finds such uses, an operand beside a value of the step's batch
(``criterion(D(x), y_real)``, ``out - y_real``). A use with no value of the
batch beside it (``netG(fixed_noise)``, images drawn for a preview) is not one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import libcst as cst
import libcst.matchers as m

from .model_methods import reads_step_value
from .names import JOINS
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex


#: In-place methods that fill (or resize) a tensor: a buffer a step fills.
RESIZES = frozenset({"resize_", "resize_as_"})
FILLS = RESIZES | frozenset(
    {"copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_"}
)

#: What a buffer is kept in: a name, or an attribute of ``self``.
Holder = cst.Name | cst.Attribute

#: Calls that wrap a tensor without changing its size.
_WRAPPERS = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def assigned_name(index: ModuleIndex, call: cst.Call) -> Holder | None:
    """``x`` of ``x = torch.FloatTensor(n, ...)`` (also with methods after the
    call, ``x = torch.FloatTensor(n).cuda()``, wrapped, ``x =
    Variable(torch.FloatTensor(n))``, or one of a tuple unpacked, ``y_real,
    y_fake = torch.ones(n, 1), torch.zeros(n, 1)``), also an attribute of
    ``self`` (``self.y_real_``); None for any other use."""
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
        elif isinstance(parent, cst.BinaryOperation):
            outer = parent  # `torch.arange(n) + n`: as many rows
        elif isinstance(parent, cst.Element) and _joined(index, parent) is not None:
            outer = _joined(index, parent)  # type: ignore[assignment]
        else:
            break
        node, parent = outer, index.parent(outer)
    if isinstance(parent, cst.Element) and parent.value is node:
        return _unpacked_name(index, parent)
    if (
        isinstance(parent, cst.Assign)
        and parent.value is node
        and len(parent.targets) == 1
        and _holder(parent.targets[0].target)
    ):
        return parent.targets[0].target  # type: ignore[return-value]
    return None


def _joined(index: ModuleIndex, element: cst.Element) -> cst.Call | None:
    """The ``torch.cat([...])`` whose list holds ``element`` (SimCLR's labels,
    ``torch.cat([torch.arange(n) + n, torch.arange(n)])``: made from the buffer)."""
    display = index.parent(element)
    arg = index.parent(display) if display is not None else None
    call = index.parent(arg) if arg is not None else None
    if (
        isinstance(display, (cst.List, cst.Tuple))
        and isinstance(arg, cst.Arg)
        and isinstance(call, cst.Call)
        and call.args
        and call.args[0] is arg
        and index.qualnames(call.func) & JOINS
    ):
        return call
    return None


def _holder(node: cst.BaseExpression) -> bool:
    """A name, or an attribute of ``self``: what a buffer is kept in."""
    return isinstance(node, cst.Name) or (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


def _holders(index: ModuleIndex, root: cst.CSTNode, key: Key) -> list[Holder]:
    """The uses of the buffer ``key`` under ``root``, in source order."""
    found = [
        n
        for n in findall(root, m.Name() | m.Attribute(value=m.Name("self")))
        if index.key(n) == key  # type: ignore[arg-type]
    ]
    # (`self` of `self.x` is a Name of another key: never among them)
    return found  # type: ignore[return-value]


def _unpacked_name(index: ModuleIndex, element: cst.Element) -> Holder | None:
    """``y_fake`` of ``y_real, y_fake = torch.ones(b, 1), torch.zeros(b, 1)``."""
    display = index.parent(element)
    assign = index.parent(display) if display is not None else None
    if not (
        isinstance(display, cst.Tuple)
        and isinstance(assign, cst.Assign)
        and assign.value is display
        and len(assign.targets) == 1
    ):
        return None
    names = assign.targets[0].target
    if not isinstance(names, cst.Tuple | cst.List) or len(names.elements) != len(
        display.elements
    ):
        return None
    at = next(i for i, e in enumerate(display.elements) if e is element)
    name = names.elements[at].value
    return name if _holder(name) else None  # type: ignore[return-value]


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
        if not _holder(receiver) or index.key(receiver) != key:
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
    first = next(iter(_holders(index, loop.body, key)), None)
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


def step_uses(
    index: ModuleIndex,
    key: Key,
    enclosing_loops: Callable[[cst.CSTNode], list[tuple[cst.For, Any]]],
) -> list[tuple[cst.CSTNode, cst.For]]:
    """The places where the buffer ``key`` is used whole beside a value of the
    batch of a loop over a prepared loader (``enclosing_loops``: the rule's,
    innermost first): an argument of a call another of whose arguments reads a
    value the loop binds (``BCE_loss(D(x), y_real)``), or an operand of an
    arithmetic or comparison whose other operand does (``D(x) - y_real``).
    Each with the innermost such loop."""
    found: list[tuple[cst.CSTNode, cst.For]] = []
    for name in _holders(index, index.module, key):
        loops = enclosing_loops(name)
        if not loops:
            continue
        loop = loops[0][0]
        user = _beside(index, name)
        if user is None:
            continue
        use, others = user
        if any(reads_step_value(index, other, loop) for other in others):
            found.append((use, loop))
    return found


def _beside(
    index: ModuleIndex, name: Holder
) -> tuple[cst.CSTNode, list[cst.CSTNode]] | None:
    """(the node using ``name`` as a whole operand, its other operands), for an
    argument of a call (not of a method of ``name`` itself), or an operand of a
    binary operation or comparison; None for any other use."""
    parent = index.parent(name)
    if isinstance(parent, cst.Arg) and parent.value is name:
        call = index.parent(parent)
        if isinstance(call, cst.Call):
            others = [a.value for a in call.args if a is not parent]
            if isinstance(call.func, cst.Attribute):
                others.append(call.func.value)  # `logits.masked_fill(mask, v)`
            return call, others
        return None
    if isinstance(parent, cst.BinaryOperation):
        other = parent.right if parent.left is name else parent.left
        return parent, [other]
    if isinstance(parent, cst.Comparison) and parent.left is name:
        return parent, [c.comparator for c in parent.comparisons]
    if isinstance(parent, cst.ComparisonTarget):
        comparison = index.parent(parent)
        if isinstance(comparison, cst.Comparison):
            others = [comparison.left] + [
                c.comparator for c in comparison.comparisons if c is not parent
            ]
            return comparison, others
    return None
