"""The parents of a file's successive trees, kept up to date where a rule changed
them, and the check that no node object occurs twice.

A rule's pass shares every unchanged subtree with the tree before it
(``fasttransform``), and libcst nodes are immutable: a node of the old tree that
the new tree holds keeps its whole subtree, and with it every parent inside.
Only the new nodes (the changed paths and the code a rule built) need walking,
and the old nodes that are gone need forgetting. Both used to be whole-tree
walks after every rule that changed the tree: ``fasttransform.unique_nodes``
(a node placed twice gets its own copy, since metadata is keyed by node) and
``ParentProvider``.

``TreeParents.advance`` walks the new nodes; it finds every node object that
occurs twice (a new node placed twice, or an old subtree placed again while it,
or a subtree around it, is still kept elsewhere) and then hands the tree to
``unique_nodes`` and computes the parents whole, as before. Otherwise it updates
the parent map: the kept subtrees' roots get their new parents, the new nodes'
children theirs, and the old nodes no longer in the tree are dropped.

Leaves that libcst itself shares between places (``spec_of`` is empty:
whitespace, a newline) are not tracked for repeats, as ``unique_nodes`` leaves
them shared; their parent is the last place that was written, as in a whole
walk, and they are never dropped. ``tests/codemod/test_tree_parents.py``
compares the map with a whole walk after every changed tree of a full pass over
the golden inputs.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from .fasttransform import spec_of, unique_nodes
from .parents import children, fill_parents, node_fields

_MAYBE = cst.MaybeSentinel.DEFAULT

#: The latest tree a tracker advanced to, and its parents, for
#: ``ParentProvider`` to copy (libcst's modules take no weak references; one
#: slot keeps one tree alive, the one being migrated).
_LATEST: list[tuple[cst.Module, dict[cst.CSTNode, cst.CSTNode]]] = []


def known_parents(module: cst.Module) -> dict[cst.CSTNode, cst.CSTNode] | None:
    """The parents of ``module`` if a tracker holds them."""
    if _LATEST and _LATEST[0][0] is module:
        return _LATEST[0][1]
    return None


def _publish(module: cst.Module, parents: dict[cst.CSTNode, cst.CSTNode]) -> None:
    _LATEST[:] = [(module, parents)]


class TreeParents:
    """The parent map of one file's current tree (every node but the module)."""

    def __init__(self) -> None:
        self.root: cst.Module | None = None
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}

    def _reset(self, module: cst.Module) -> None:
        parents: dict[cst.CSTNode, cst.CSTNode] = {}
        fill_parents(module, parents)
        self.root = module
        self.parents = parents
        _publish(module, parents)

    def advance(
        self,
        old: cst.Module,
        new: cst.Module,
        computed: dict[cst.CSTNode, cst.CSTNode] | None = None,
    ) -> cst.Module:
        """``new`` (a rule's result from ``old``) with no node object twice, and
        its parents known: what ``unique_nodes(new)`` gives, up to which of a
        repeated node's places keeps the object. ``computed``: the parents of
        ``old`` where they were computed already."""
        if self.root is not old:
            if computed is None:
                self._reset(old)
            else:
                self.root, self.parents = old, dict(computed)
        walk = _Walk(new, self.parents, old)
        if walk.repeats or walk.inside:
            # Rules build nodes with libcst's shared defaults (an Attribute's
            # ``Dot()``): each further place gets a copy, the new paths rebuilt.
            new = _Rebuild(self.parents, walk).node(new)  # type: ignore[assignment]
            walk = _Walk(new, self.parents, old)
            if walk.repeats or walk.inside:  # not expected: the whole-tree way
                module = unique_nodes(new)
                self._reset(module)  # type: ignore[arg-type]
                return module  # type: ignore[return-value]
        self._forget(old, walk.kept)
        parents = self.parents
        for child, parent in walk.edges:
            parents[child] = parent
        self.root = new
        _publish(new, parents)
        return new

    def _forget(self, old: cst.Module, kept: dict[int, Any]) -> None:
        """Drop the old nodes the new tree no longer holds."""
        parents = self.parents
        stack: list[cst.CSTNode] = [old]
        while stack:
            node = stack.pop()
            for child in children(node):
                if id(child) in kept or spec_of(type(child)) == ():
                    continue
                parents.pop(child, None)
                stack.append(child)


class _Walk:
    """The new nodes of a tree (those its old tree does not hold) and the old
    subtrees they hold: their roots (``kept``), the nodes placed again
    (``repeats``) and the kept roots that a kept subtree holds too
    (``inside``)."""

    def __init__(
        self,
        new: cst.CSTNode,
        parents: dict[cst.CSTNode, cst.CSTNode],
        old: cst.Module,
    ) -> None:
        self.kept: dict[int, cst.CSTNode] = {}
        self.repeats: set[int] = set()
        self.edges: list[tuple[cst.CSTNode, cst.CSTNode]] = []
        seen: set[int] = set()
        stack: list[cst.CSTNode] = [new]
        while stack:
            node = stack.pop()
            for child in children(node):
                self.edges.append((child, node))
                if spec_of(type(child)) == ():
                    continue  # shared by libcst too
                key = id(child)
                if key in seen:
                    self.repeats.add(key)
                    continue
                seen.add(key)
                if child in parents:  # an old node: its subtree is unchanged
                    self.kept[key] = child
                else:
                    stack.append(child)
        self.inside = {
            key
            for key, node in self.kept.items()
            if _kept_above(node, parents, self.kept, old)
        }


class _Rebuild:
    """The new nodes again, with a copy at each further place of a repeated
    node (and at every new place of one a kept subtree holds)."""

    def __init__(self, parents: dict[cst.CSTNode, cst.CSTNode], walk: _Walk) -> None:
        self.parents = parents
        self.copy_always = walk.inside
        self.repeats = walk.repeats
        self.placed: set[int] = set()

    def child(self, node: cst.CSTNode) -> cst.CSTNode:
        if spec_of(type(node)) == ():
            return node
        key = id(node)
        if key in self.copy_always:
            return node.deep_clone()
        if key in self.repeats:
            if key in self.placed:
                return node.deep_clone()
            self.placed.add(key)
        if node in self.parents:
            return node
        return self.node(node)

    def node(self, node: cst.CSTNode) -> cst.CSTNode:
        changes: dict[str, Any] = {}
        for name in node_fields(node):
            value = getattr(node, name)
            if value is None or value is _MAYBE:
                continue
            if type(value) is tuple or type(value) is list:
                items = [self.child(item) for item in value]
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[name] = tuple(items)
            elif isinstance(value, cst.CSTNode):
                found = self.child(value)
                if found is not value:
                    changes[name] = found
        return node.with_changes(**changes) if changes else node


def _kept_above(
    node: cst.CSTNode,
    parents: dict[cst.CSTNode, cst.CSTNode],
    kept: dict[int, cst.CSTNode],
    old: cst.Module,
) -> bool:
    """Is an old subtree around ``node`` kept too (``node`` would then occur
    twice: there and where the rule put it)?"""
    above = parents.get(node)
    while above is not None and above is not old:
        if id(above) in kept:
            return True
        above = parents.get(above)
    return False
