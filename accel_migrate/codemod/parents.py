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


def _fields(kind: type) -> tuple[str, ...]:
    names = _FIELDS.get(kind)
    if names is None:
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


class ParentProvider(BaseMetadataProvider[cst.CSTNode]):
    def _gen_impl(self, module: cst.Module) -> None:
        parents = self._computed
        maybe = cst.MaybeSentinel.DEFAULT
        stack: list[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            spec = spec_of(type(node))
            if spec is None:
                self._children_of(node, stack)
                continue
            # The fields libcst visits (fasttransform): each holds a node, a
            # sequence of nodes, None or MaybeSentinel; no isinstance against
            # libcst's abstract node class (slow) per field.
            for name, _ in spec:
                value = getattr(node, name)
                if value is None or value is maybe:
                    continue
                if type(value) is tuple or type(value) is list:
                    for item in value:
                        parents[item] = node
                        stack.append(item)
                else:
                    parents[value] = node
                    stack.append(value)

    def _children_of(self, node: cst.CSTNode, stack: list[cst.CSTNode]) -> None:
        parents = self._computed
        node_type = cst.CSTNode
        for name in _fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, node_type):
                parents[value] = node
                stack.append(value)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    if isinstance(item, node_type):
                        parents[item] = node
                        stack.append(item)
