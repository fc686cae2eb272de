"""Subtree queries answered from one walk of the tree: ``findall``, ``nodes_run_by``
and ``variable_names`` without a walk per question.

The rules ask the same kinds of question again and again, each with a walk of its
own: the ``return`` statements of a function, the calls in a loop body, the names
in an expression (``matchers.findall`` and small visitors). Measured on a training
script, those walks were the largest part of a pass once libcst's rebuilds were
gone (see docs/performance.md, "shared facts").

``Preorder`` records every node of one tree in libcst's visit order (the order a
visitor's ``on_visit`` sees them, which is ``findall``'s order), the end of each
node's subtree in that order, and per node class the positions of its nodes. The
nodes under ``node`` of class ``Call`` are then a slice of one sorted list.

Why it is safe to share: libcst nodes are immutable, so what lies under a node
never changes, whichever tree the node is part of. A rule's pass that changes the
tree shares its unchanged subtrees with the tree before (``fasttransform``): a
preorder of the old tree still answers for every node they have in common, and no
answer ever has to be invalidated. A node no known preorder holds (one a rule has
just built) is answered by the walk it replaces.

A matcher that asks more than a node's class is checked on each candidate by
the predicate ``matcher_predicates`` reads it into (libcst's ``_matches`` where
it does not read the matcher).

``register(module)`` names the tree being migrated (``ModuleIndex`` does); its
preorder is built on the first question. A few of the latest trees are kept.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.matchers._matcher_base import (
    BaseMatcherNode,
    DoNotCareSentinel,
    OneOf,
    _construct_metadata_fetcher_null,
    _matches,
)

from . import matcher_predicates

#: How many trees' preorders are kept (the trees before and after the latest
#: rules that changed one; older trees are not asked about again).
_KEPT = 3
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


class Preorder:
    """Every node under ``root`` in libcst's visit order, with subtree spans."""

    def __init__(self, root: cst.CSTNode, previous: Preorder | None = None) -> None:
        recorder = _Recorder(previous)
        root.visit(recorder)
        self.root = root
        self.order: list[cst.CSTNode] = recorder.order
        #: Per position: the position after its node's subtree.
        self.end: list[int] = recorder.end
        self.position: dict[cst.CSTNode, int] = {
            node: i for i, node in enumerate(self.order)
        }
        #: Per node class name (what a matcher compares): its nodes' positions.
        self.by_kind: dict[str, list[int]] = {}
        for i, node in enumerate(self.order):
            name = type(node).__name__
            bucket = self.by_kind.get(name)
            if bucket is None:
                bucket = self.by_kind[name] = []
            bucket.append(i)
        #: Names that are no variable: an attribute's name, a keyword's name.
        self.not_variables: set[cst.Name] = recorder.not_variables
        self._run_by: dict[cst.CSTNode, list[cst.CSTNode]] = {}

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        start = self.position[node]
        return start, self.end[start]

    def of_kinds(self, node: cst.CSTNode, kinds: Sequence[str]) -> list[cst.CSTNode]:
        """The nodes at or under ``node`` of the classes named ``kinds``, in visit
        order."""
        start, stop = self.span(node)
        found: list[int] = []
        for kind in kinds:
            bucket = self.by_kind.get(kind)
            if bucket:
                found += bucket[bisect_left(bucket, start) : bisect_left(bucket, stop)]
        if len(kinds) > 1:
            found.sort()
        order = self.order
        return [order[i] for i in found]

    def run_by(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """``node`` and the nodes under it, less the functions, classes and
        lambdas it defines (with everything under them)."""
        found = self._run_by.get(node)
        if found is None:
            start, stop = self.span(node)
            order, end = self.order, self.end
            found = [node]
            i = start + 1
            while i < stop:
                inner = order[i]
                if isinstance(inner, _NESTED):
                    i = end[i]
                    continue
                found.append(inner)
                i += 1
            self._run_by[node] = found
        return list(found)


class _Recorder(cst.CSTVisitor):
    """Records a tree in visit order. A subtree that ``previous`` (the preorder
    of an earlier tree) holds is copied from it, not walked: a rule's pass
    shares every subtree it did not change with the tree before."""

    def __init__(self, previous: Preorder | None = None) -> None:
        super().__init__()
        self.order: list[cst.CSTNode] = []
        self.end: list[int] = []
        self._open: list[int] = []
        self.not_variables: set[cst.Name] = set()
        self._previous = previous

    def on_visit(self, node: cst.CSTNode) -> bool:
        previous = self._previous
        if previous is not None:
            start = previous.position.get(node)
            if start is not None:
                self._copy(previous, start)
                self._open.append(-1)
                return False
        self._open.append(len(self.order))
        self.order.append(node)
        self.end.append(0)
        if type(node) is cst.Attribute:
            self.not_variables.add(node.attr)
        elif type(node) is cst.Arg and node.keyword is not None:
            self.not_variables.add(node.keyword)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        opened = self._open.pop()
        if opened >= 0:
            self.end[opened] = len(self.order)

    def _copy(self, previous: Preorder, start: int) -> None:
        stop = previous.end[start]
        shift = len(self.order) - start
        nodes = previous.order[start:stop]
        self.order += nodes
        self.end += [end + shift for end in previous.end[start:stop]]
        # What is no variable is read off the subtree itself, as the walk would.
        not_variables = self.not_variables
        for inner in nodes:
            kind = type(inner)
            if kind is cst.Attribute:
                not_variables.add(inner.attr)  # type: ignore[attr-defined]
            elif kind is cst.Arg and inner.keyword is not None:  # type: ignore[attr-defined]
                not_variables.add(inner.keyword)  # type: ignore[attr-defined]


_trees: list[cst.CSTNode] = []
_preorders: dict[int, Preorder] = {}


def register(module: cst.CSTNode) -> None:
    """``module`` is the tree now being read: its preorder answers (when first
    asked) before the older ones."""
    if _trees and _trees[-1] is module:
        return
    if module in _trees:
        _trees.remove(module)
    _trees.append(module)
    while len(_trees) > _KEPT:
        _preorders.pop(id(_trees.pop(0)), None)


def clear() -> None:
    """Forget every tree (the end of one file's migration)."""
    _trees.clear()
    _preorders.clear()


def preorder_of(node: cst.CSTNode) -> Preorder | None:
    """A preorder of a registered tree that holds ``node``, if one does."""
    for tree in reversed(_trees):
        found = _preorders.get(id(tree))
        if found is None:
            found = _preorders[id(tree)] = Preorder(tree, _latest())
        if node in found.position:
            return found
    return None


def _latest() -> Preorder | None:
    """The preorder of the latest tree that has one: the tree a new one was made
    from shares most of its subtrees."""
    for tree in reversed(_trees):
        found = _preorders.get(id(tree))
        if found is not None:
            return found
    return None


# -- the questions -----------------------------------------------------------------------

_NULL_FETCHER = _construct_metadata_fetcher_null()
#: Per matcher object: the node class names it can match and whether a class
#: match is all it asks (None: a matcher this module does not read).
_MATCHERS: dict[int, tuple[Any, tuple[str, ...] | None, bool]] = {}


def _kinds(matcher: Any) -> tuple[tuple[str, ...] | None, bool]:
    cached = _MATCHERS.get(id(matcher))
    if cached is not None and cached[0] is matcher:
        return cached[1], cached[2]
    kinds: tuple[str, ...] | None
    if isinstance(matcher, OneOf):
        options = [_kinds(option) for option in matcher.options]
        if any(k is None for k, _ in options):
            kinds, plain = None, False
        else:
            kinds = tuple(dict.fromkeys(n for k, _ in options for n in k or ()))
            plain = all(p for _, p in options)
    elif isinstance(matcher, BaseMatcherNode) and hasattr(cst, type(matcher).__name__):
        kinds = (type(matcher).__name__,)
        plain = all(
            isinstance(getattr(matcher, name), DoNotCareSentinel)
            for name in _field_names(type(matcher))
        )
    else:
        kinds, plain = None, False
    # Matchers are module constants or built per call: the cache keeps the object
    # (its id is not reused while it is held) and is bounded.
    if len(_MATCHERS) > 512:
        _MATCHERS.clear()
    _MATCHERS[id(matcher)] = (matcher, kinds, plain)
    return kinds, plain


#: Per matcher class: its fields but ``_metadata`` (``dataclasses.fields`` builds
#: them anew each call, and most matchers are built anew per question).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    found = _FIELD_NAMES.get(kind)
    if found is None:
        found = _FIELD_NAMES[kind] = tuple(
            f.name for f in fields(kind) if f.name != "_metadata"
        )
    return found


def findall(tree: Any, matcher: Any) -> list[cst.CSTNode]:
    """``libcst.matchers.findall(tree, matcher)`` (no metadata), from a preorder."""
    if isinstance(tree, cst.CSTNode):
        kinds, plain = _kinds(matcher)
        if kinds is not None:
            found = preorder_of(tree)
            if found is not None:
                nodes = found.of_kinds(tree, kinds)
                if plain:
                    return nodes
                check = (
                    matcher_predicates.predicate(matcher)
                    if matcher_predicates.COMPILED
                    else None
                )
                if check is not None:
                    return [n for n in nodes if check(n)]
                return [
                    n for n in nodes if _matches(n, matcher, _NULL_FETCHER) is not None
                ]
    return list(m.findall(tree, matcher))


def nodes_run_by(node: cst.CSTNode) -> list[cst.CSTNode] | None:
    """``node`` and what runs when it runs (not the bodies of the functions,
    classes and lambdas it defines); None where no preorder holds ``node``."""
    found = preorder_of(node)
    return None if found is None else found.run_by(node)


def variable_names(node: cst.CSTNode) -> list[cst.Name] | None:
    """The names used as variables at or under ``node`` (not an attribute's or a
    keyword's name, unless ``node`` is that name); None where no preorder holds
    ``node``."""
    found = preorder_of(node)
    if found is None:
        return None
    names = found.of_kinds(node, ("Name",))
    skip = found.not_variables
    return [n for n in names if n is node or n not in skip]  # type: ignore[misc]
