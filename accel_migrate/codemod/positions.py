"""Positions and code of a changed tree, generated again only where it changed.

After a rule changes the tree, the next rules need its positions (libcst's
``PositionProvider``: a code generation that records where each node starts and
ends) and its code (``Module.code``), to map a place back to the user's file
(``LineMap``). Both come from the same tokens: the provider's codegen state
collects exactly the strings ``Module.code`` joins, so ``compute`` runs one code
generation for both and stores the positions where
``MetadataWrapper.resolve(PositionProvider)`` finds them.

That generation is incremental. A rule's pass shares every unchanged subtree
with the tree before it (``fasttransform``), and libcst nodes are immutable, so
a statement that is the same object as in an earlier tree generates the same
tokens and the same positions, shifted by whole lines, whenever it starts in the
same state: column 0, under the same indentation (``Chunks`` checks both; a
statement's code depends on nothing else). ``compute`` generates only the
statements that are new (the changed paths, their parents, the new code) and
replays the others: their tokens are copied, and their nodes' positions are
read, when asked, from the tree in which they were generated, moved by the
difference in lines (``Positions``). ``tests/codemod/test_positions.py``
compares every node's position and the code with libcst's own on every tree a
full pass makes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Any

import libcst as cst
from libcst._position import CodePosition
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

#: True: the code a pass asks of a tree (``ModuleIndex.code``, the parsed
#: tree's ``RuleContext.original_code``) is the string generated with its
#: positions, only a changed tree's new statements generated; False: a whole
#: ``Module.code`` each time (before round 23 of issue 14; the equivalence test
#: and ``bench/codemod_profile.py --codes`` compare the two).
SHARED_CODE = True

_default_codegen = cst.CSTNode._codegen
_get = dict.get
_has = dict.__contains__
_set = dict.__setitem__


class _Chunk:
    """A statement as one generation wrote it: its tokens (a slice of that
    generation's list), its lines, and where its nodes' positions are."""

    __slots__ = (
        "end",
        "indent",
        "line",
        "lines",
        "nested",
        "source",
        "t0",
        "t1",
        "tokens",
    )

    def __init__(
        self,
        source: Positions,
        tokens: list[str],
        t0: int,
        t1: int,
        line: int,
        lines: int,
        end: int,
        indent: tuple[str, ...],
        nested: list[tuple[_Chunk, int]],
    ) -> None:
        self.source = source
        self.tokens = tokens
        self.t0 = t0
        self.t1 = t1
        self.line = line
        self.lines = lines
        self.end = end
        self.indent = indent
        #: The statements under it that its generation replayed, with the lines
        #: each moved by there (its nodes' positions are theirs).
        self.nested = nested


class Chunks:
    """The generated statements of one file's trees (a statement node: its
    chunk). Kept by the RuleContext of one full pass."""

    def __init__(self) -> None:
        self.by_node: dict[cst.CSTNode, _Chunk] = {}
        self.layout: tuple[str, str] | None = None

    def release(self) -> None:
        """Empty the positions of every tree these statements were generated
        for, and forget the statements: the end of the file's pass
        (``engine._full_pass``). The pass's wrappers, scopes and rules hold
        the positions in reference cycles, so without this they wait, with the
        rest of the pass's cyclic garbage, for the collector's next young
        collection to walk them: 47,000 of the 79,000 containers a pass of a
        400-line script leaves (``CodeRange``, ``CodePosition``). Emptied here
        they are freed by their reference counts (3-5 ms), and that
        collection walks a third as many (round 22 of issue 14)."""
        for chunk in self.by_node.values():
            source = chunk.source
            source.clear()
            source.log.clear()
            source._replayed = {}
        self.by_node.clear()


class Positions(dict):  # type: ignore[type-arg]
    """A tree's positions: those generated for it, and, for the nodes of a
    replayed statement, those of the tree that generated it, moved by lines.

    A statement is replayed only whole, in a tree in which it occurs once (the
    engine's ``unique_nodes``), so the nodes under it lie, in the generating
    tree, at lines inside its span, and no other replayed statement's span from
    that tree holds them; its parents are always generated here (a parent that
    had not changed would have been replayed whole instead).

    One difference from libcst: a leaf that libcst itself shares between places
    (whitespace, a newline, a comment: ``unique_nodes`` leaves those shared) is
    placed where libcst first generates it, which here may be another of its
    places when the first is inside a replayed statement. No rule asks where
    such a leaf is; every other node's place is libcst's (``test_positions``)."""

    def __init__(self) -> None:
        super().__init__()
        #: Every statement replayed here (also those under a replayed one, which
        #: its generation replayed), with the lines it moved by.
        self.log: list[tuple[_Chunk, int]] = []
        #: ``log`` per generating tree: its chunks by first line.
        self._replayed: dict[int, tuple[Positions, list[int], list[tuple[_Chunk, int]]]]
        self._replayed = {}
        self._sorted = 0

    def _add(self, chunk: _Chunk, delta: int) -> None:
        log = self.log
        log.append((chunk, delta))
        for inner, moved in chunk.nested:
            log.append((inner, moved + delta))

    def _sort(self) -> None:
        groups: dict[int, tuple[Positions, list[int], list[tuple[_Chunk, int]]]] = {}
        for chunk, delta in self.log:
            group = groups.get(id(chunk.source))
            if group is None:
                group = groups[id(chunk.source)] = (chunk.source, [], [])
            group[2].append((chunk, delta))
        for _source, lines, chunks in groups.values():
            chunks.sort(key=lambda c: c[0].line)
            lines.extend(c[0].line for c in chunks)
        self._replayed = groups
        self._sorted = len(self.log)

    def __missing__(self, node: cst.CSTNode) -> CodeRange:
        found = self._find(node)
        if found is None:
            raise KeyError(node)
        return found

    def _find(self, node: cst.CSTNode) -> CodeRange | None:
        if self._sorted != len(self.log):
            self._sort()
        for source, lines, chunks in self._replayed.values():
            # The generating tree's own entry (generated there, or found there
            # under a statement it replayed: either is its place in that tree).
            place = _get(source, node)
            if place is None:
                continue
            start = place.start.line
            where = bisect_right(lines, start) - 1
            if where < 0:
                continue
            chunk, delta = chunks[where]
            if start >= chunk.line + chunk.lines:
                continue
            if delta:
                place = CodeRange(
                    CodePosition(start + delta, place.start.column),
                    CodePosition(place.end.line + delta, place.end.column),
                )
            _set(self, node, place)
            return place
        return None

    def get(self, node: Any, default: Any = None) -> Any:
        found = _get(self, node)
        if found is None:
            found = self._find(node) if self.log else None
            if found is None:
                return default
        return found

    def __contains__(self, node: object) -> bool:
        return self.get(node) is not None


class _State(PositionProvidingCodegenState):
    """libcst's position codegen state, with the statements replayed where they
    can be (``_statement_codegen``) and the trailing newline dropped without
    changing the token list (a later tree replays its tokens)."""

    __slots__ = ("chunks", "drop_last")

    def pop_trailing_newline(self) -> None:
        self.drop_last = bool(self.tokens)

    def after_codegen(self, node: cst.CSTNode) -> None:
        # libcst's, with the test on the generated entries only: a node generated
        # here is never one of a replayed statement's (each node occurs once).
        start = self._stack.pop()
        computed = self.provider._computed
        if not _has(computed, node):
            _set(computed, node, CodeRange(start, CodePosition(self.line, self.column)))

    def statement(self, node: cst.CSTNode) -> None:
        chunks = self.chunks.by_node
        provider = self.provider
        chunk = chunks.get(node)
        if (
            chunk is not None
            and self.column == 0
            and chunk.indent == tuple(self.indent_tokens)
        ):
            delta = self.line - chunk.line
            self.tokens.extend(chunk.tokens[chunk.t0 : chunk.t1])
            self.line += chunk.lines
            self.column = chunk.end
            computed = provider._computed
            computed._add(chunk, delta)
            # The statement's own range, which its parent's codegen may read
            # (an IndentedBlock's syntactic range is its first and last one's):
            # stored where its chunk's generation stored it, moved by ``delta``.
            # (``_find`` would give the same, but sorts the whole log first: once
            # per replayed statement, that was most of a generation's time.)
            place = _get(chunk.source, node)
            if place is not None:
                if delta:
                    place = CodeRange(
                        CodePosition(place.start.line + delta, place.start.column),
                        CodePosition(place.end.line + delta, place.end.column),
                    )
                _set(computed, node, place)
            return
        line, column, t0 = self.line, self.column, len(self.tokens)
        log = provider._computed.log
        first = len(log)
        self.before_codegen(node)
        node._codegen_impl(self)
        self.after_codegen(node)
        if column == 0:
            chunks[node] = _Chunk(
                provider._computed,
                self.tokens,
                t0,
                len(self.tokens),
                line,
                self.line - line,
                self.column,
                tuple(self.indent_tokens),
                log[first:],
            )


def _statement_codegen(self: cst.CSTNode, state: Any, **kwargs: Any) -> None:
    # Installed as the statements' ``_codegen``: only compute's state replays, and
    # only a statement its parent generates with no options (an ``elif`` is an
    # ``If`` generated with ``is_elif=True``).
    if kwargs or type(state) is not _State:
        _default_codegen(self, state, **kwargs)
    else:
        state.statement(self)


def _install() -> None:
    stack = [cst.BaseStatement]
    while stack:
        kind = stack.pop()
        stack.extend(kind.__subclasses__())
        if "_codegen_impl" in kind.__dict__ or kind is cst.SimpleStatementLine:
            kind._codegen = _statement_codegen  # type: ignore[method-assign]


_install()


class _CodeAndPositions(PositionProvider):
    """libcst's ``PositionProvider`` on the incremental state."""

    def generate(self, module: cst.Module, chunks: Chunks) -> tuple[Positions, str]:
        layout = (module.default_indent, module.default_newline)
        if chunks.layout != layout:  # a statement's code depends on them
            chunks.by_node.clear()
            chunks.layout = layout
        computed = self._computed = Positions()
        state = _State(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            provider=self,
        )
        state.chunks = chunks
        state.drop_last = False
        module._codegen(state)
        tokens = state.tokens
        code = "".join(tokens[:-1] if state.drop_last else tokens)
        return computed, code


def compute(
    wrapper: MetadataWrapper, chunks: Chunks | None = None
) -> tuple[Mapping[cst.CSTNode, CodeRange], str]:
    """``wrapper``'s positions, computed now and stored in the wrapper where
    ``resolve(PositionProvider)`` finds them, and its module's code. ``chunks``:
    the statements generated for the file's earlier trees (replayed where
    unchanged); None: every statement is generated."""
    positions, code = _CodeAndPositions().generate(
        wrapper.module, chunks if chunks is not None else Chunks()
    )
    wrapper._metadata[PositionProvider] = positions  # type: ignore[attr-defined]
    return positions, code


def code_of(module: cst.Module, chunks: Chunks) -> str:
    """``module.code``, generating only the statements no earlier tree of the file
    generated (the migrated module with its runtime import, at the end)."""
    return _CodeAndPositions().generate(module, chunks)[1]
