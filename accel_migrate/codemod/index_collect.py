"""The one walk of a tree that lists its assignments, functions, classes, calls and
loops for ``ModuleIndex``.

Since round 24 of issue 14 that walk is no visit of the tree: the tree's
``subtrees.Preorder`` (built once per tree for the rules' subtree questions,
copying every subtree an earlier tree shares) already holds its nodes in the
order a visitor's ``visit_`` callbacks see them, and per node class where
they are, so ``collect`` hands the collector's callbacks the nodes of the
classes it has one for, in that order: the same calls, in the same order,
without a Python call per node of the tree. ``FROM_PREORDER = False`` visits
the tree (``tests/codemod/test_index_collect.py`` compares the two).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import libcst as cst

from . import subtrees
from .index_syntax import Key, _unpacked
from .names import TQDM_CALLS

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: False: ``collect`` visits the tree (before round 24 of issue 14).
FROM_PREORDER = True


class _Collector(cst.CSTVisitor):
    def __init__(self, index: ModuleIndex) -> None:
        super().__init__()
        self.index = index
        self.values: dict[Key, list[cst.BaseExpression | None]] = defaultdict(list)
        self.unpacked: dict[Key, list[tuple[cst.BaseExpression, int, int]]] = (
            defaultdict(list)
        )
        self.functions: list[cst.FunctionDef] = []
        self.classes: list[cst.ClassDef] = []
        self.calls: list[cst.Call] = []
        self.for_loops: list[cst.For] = []
        self.match_captures: set[str] = set()
        self.star_import = False

    def _bind_target(
        self, target: cst.BaseExpression, value: cst.BaseExpression | None
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            values = _unpacked(target, value)
            plain = not any(isinstance(e, cst.StarredElement) for e in target.elements)
            for position, (element, item) in enumerate(
                zip(target.elements, values, strict=True)
            ):
                self._bind_target(element.value, item)
                inner = self.index.key(element.value)
                if item is None and value is not None and plain and inner is not None:
                    self.unpacked[inner].append((value, position, len(target.elements)))
            return
        key = self.index.key(target)
        if key is not None:
            self.values[key].append(value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind_target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target, node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        # `with tqdm(loader) as pbar:` binds what `pbar = tqdm(loader)` would (a
        # bar's __enter__ returns the bar): a loop over `pbar` is a loader loop.
        # Only bars: other context managers may enter as something else.
        if (
            node.asname is not None
            and isinstance(node.item, cst.Call)
            and not self.index.qualnames(node.item.func).isdisjoint(TQDM_CALLS)
        ):
            self._bind_target(node.asname.name, node.item)  # type: ignore[arg-type]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_For(self, node: cst.For) -> None:
        self.for_loops.append(node)

    def visit_ImportStar(self, node: cst.ImportStar) -> None:
        self.star_import = True

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self.match_captures.add(node.name.value)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self.match_captures.add(node.name.value)

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self.match_captures.add(node.rest.value)


#: The node classes the collector has a ``visit_`` callback for, and each one's.
_CALLBACKS = {
    name[len("visit_") :]: callback
    for name, callback in vars(_Collector).items()
    if name.startswith("visit_")
}
_KINDS = tuple(_CALLBACKS)


def collect(index: ModuleIndex) -> _Collector:
    """The collector's lists of ``index``'s tree: its callbacks called on the
    nodes of their classes in the tree's visit order (its preorder's), or by a
    visit of the tree where no preorder holds it."""
    collector = _Collector(index)
    module = index.module
    found = subtrees.preorder_of(module) if FROM_PREORDER else None
    if found is None:
        module.visit(collector)
        return collector
    callbacks = _CALLBACKS
    for node in found.of_kinds(module, _KINDS):
        callbacks[type(node).__name__](collector, node)
    return collector
