"""``ParentProvider``: every node's parent, what libcst's ``ParentNodeProvider``
answers, several times faster.

libcst's provider asks each node for its ``children``, and each such answer is a
visit of its own; after every rule that changes the tree, the rules need the
parents again (measured: 44 ms of a 100-line script's ~190 ms per modified tree,
1.25 s on a 6,000-line file). Here one walk reads the node fields directly. A
test checks that both give the same parents on every fixture.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
from libcst.metadata import BaseMetadataProvider

from .fasttransform import spec_of

_FIELDS: dict[type, tuple[str, ...]] = {}
_MAYBE = cst.MaybeSentinel.DEFAULT


def _fields(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


class ParentProvider(BaseMetadataProvider[cst.CSTNode]):
    def _gen_impl(self, module: cst.Module) -> None:
        from .tree_parents import known_parents

        known = known_parents(module)
        if known is not None:  # kept up to date by the engine (tree_parents)
            self._computed.update(known)
            return
        fill_parents(module, self._computed)


def fill_parents(module: cst.Module, parents: dict[cst.CSTNode, cst.CSTNode]) -> None:
    """Write the parent of every node of ``module`` (one whole walk) into
    ``parents``."""
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in children(node):
            parents[child] = node
            stack.append(child)


def node_fields(node: cst.CSTNode) -> tuple[str, ...]:
    """The fields of ``node`` that may hold nodes, in libcst's visiting order."""
    spec = spec_of(type(node))
    return _fields(type(node)) if spec is None else tuple(name for name, _ in spec)


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """``node``'s child nodes, in the order libcst visits them."""
    spec = spec_of(type(node))
    found: list[cst.CSTNode] = []
    if spec is None:
        node_type = cst.CSTNode
        for name in _fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, node_type):
                found.append(value)
            elif isinstance(value, (list, tuple)):
                found.extend(item for item in value if isinstance(item, node_type))
        return found
    # The fields libcst visits (fasttransform): each holds a node, a sequence of
    # nodes, None or MaybeSentinel; no isinstance against libcst's abstract node
    # class (slow) per field.
    maybe = _MAYBE
    for name, _ in spec:
        value = getattr(node, name)
        if value is None or value is maybe:
            continue
        if type(value) is tuple or type(value) is list:
            found.extend(value)
        else:
            found.append(value)
    return found
