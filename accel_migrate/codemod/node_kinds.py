"""Which node classes occur under a node: one bit per libcst node class.

A walk whose visitor has hooks for a few node classes only (most rules hook
``Call``; some only ``Module`` or ``For``) makes no callback at all in a subtree
that holds none of them, so it can hand that subtree back without entering it.
``mask_of(node)`` is the OR of the bits of every node class in ``node``'s subtree,
``node`` included; ``hooked_mask`` is the bits of the classes a hook is looked up
for. A subtree with ``mask_of(node) & hooked == 0`` is skipped.

The masks are kept per node object for the current file (``keep``/``release``
around one file's full pass): the trees of successive rule passes share their
unchanged subtrees, so each is computed once. A node is held by the table while
its entry lives, so its ``id`` cannot be reused by another node.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import libcst as cst

_MAYBE = cst.MaybeSentinel.DEFAULT


def _node_classes() -> list[type]:
    found: list[type] = []
    stack = [cst.CSTNode]
    seen: set[type] = set()
    while stack:
        kind = stack.pop()
        for sub in kind.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                # dataclass(slots=True) leaves the class it replaced among the
                # subclasses: only the one its module holds is made.
                if getattr(sys.modules.get(sub.__module__), sub.__name__, None) is sub:
                    found.append(sub)
    return sorted(found, key=lambda k: (k.__module__, k.__qualname__))


#: A bit for every node class libcst defines; a class made later (a subclass of
#: libcst's, say) shares ``UNKNOWN``, which every hooked mask includes.
BITS: dict[type, int] = {kind: 1 << n for n, kind in enumerate(_node_classes())}
UNKNOWN = 1 << len(BITS)
#: The bits by class name, as a hook names them (``visit_Call``).
BY_NAME: dict[str, int] = {kind.__name__: bit for kind, bit in BITS.items()}

#: id(node) -> (mask, node): the node is kept alive with its entry.
_MASKS: dict[int, tuple[int, cst.CSTNode]] | None = None


@contextmanager
def keep() -> Iterator[None]:
    """Keep masks for the duration of one file's pass (nested passes share it)."""
    global _MASKS
    outer = _MASKS
    if outer is None:
        _MASKS = {}
    try:
        yield
    finally:
        if outer is None:
            _MASKS = None


def _children(node: cst.CSTNode, fields: tuple[str, ...] | None) -> Iterator[Any]:
    if fields is None:
        yield from node.children
        return
    for name in fields:
        value = getattr(node, name)
        if value is None or value is _MAYBE:
            continue
        if type(value) is tuple or type(value) is list:
            yield from value
        else:
            yield value


def active() -> bool:
    """Are masks kept (inside ``keep``)? Outside, a walk does not prune: each
    ``mask_of`` would walk its subtree again."""
    return _MASKS is not None


def mask_of(node: cst.CSTNode, fields_of: Callable[[cst.CSTNode], Any]) -> int:
    """The bits of every node class in ``node``'s subtree. ``fields_of(node)``:
    every field that holds its children (None: ask libcst's ``children``)."""
    table = _MASKS
    if table is not None:
        found = table.get(id(node))
        if found is not None:
            return found[0]
    mask = BITS.get(type(node), UNKNOWN)
    for child in _children(node, fields_of(node)):
        mask |= mask_of(child, fields_of)
    if table is not None:
        table[id(node)] = (mask, node)
    return mask


def hooked_mask(has_hook: Callable[[type], bool]) -> int:
    """The bits of the node classes ``has_hook`` says yes to, and ``UNKNOWN``."""
    mask = UNKNOWN
    for kind, bit in BITS.items():
        if has_hook(kind):
            mask |= bit
    return mask
