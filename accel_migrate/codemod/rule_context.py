"""What the rules that run over one file share: their findings, the current
tree's derived data (index, positions, code, suppressed statements) and the
map from the current code's places back to the user's."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import libcst as cst
from libcst.metadata import (
    MetadataWrapper,
    PositionProvider,
)

from . import positions
from .analysis import LazyQualifiedNames, ModuleIndex
from .divergence_memo import DivergenceMemo
from .findings import Finding
from .function_syntax import FunctionSyntax
from .linemap import LineMap
from .project_file_facts import ProjectFacts
from .scopes import ScopeProvider
from .suppression import SKIP_COMMENT, Codes, applies, suppressed_statements
from .tree_parents import TreeParents

#: ``accel.`` in a message: the runtime under the default alias (not ``accel_x.``).
_RUNTIME_NAME = re.compile(r"(?<![\w.])accel\.")


@dataclass
class RuleContext:
    """State shared by the rules that run over one file."""

    alias: str
    original_code: str
    findings: list[Finding] = field(default_factory=list)
    #: Set by a rule that changed the tree (not only the runtime import).
    changed: bool = False
    #: (first, last) original lines of statements left alone by ``# accel-migrate: skip``.
    suppressed: set[tuple[int, int]] = field(default_factory=set)
    #: What each of ``suppressed`` was suppressed for (None: every rule).
    suppressed_codes: dict[tuple[int, int], Codes] = field(default_factory=dict)
    #: False: ``# accel-migrate: skip`` is not honoured (to find unused ones).
    honour_suppressions: bool = True
    #: Needs-review findings that stop the migration of the whole file (``block``).
    blocking: list[Finding] = field(default_factory=list)
    #: Findings whose claim holds only of the migrated file ("the main process
    #: shows its share's value"): dropped when a blocking finding leaves the
    #: file whole (``Rule.report(..., if_migrated=True)``).
    if_migrated: list[Finding] = field(default_factory=list)
    #: Original (line, column) of ``xs.append(v)`` calls that AM009 (metric sums)
    #: cannot classify and leaves to AM029 (collected outputs).
    deferred_collections: set[tuple[int, int]] = field(default_factory=set)
    #: Codes of the rules this pass runs (empty: every rule), for a rule that
    #: leaves a case to a later one.
    running: frozenset[str] = frozenset()
    _linemap: tuple[str, LineMap] | None = None
    #: The parsed module, whose code is ``original_code`` (no codegen needed).
    original_module: cst.Module | None = None
    #: The latest changed tree's code and suppressed statements (rules that
    #: change nothing share a wrapper, and ask again).
    _code: tuple[cst.Module, str] | None = None
    _suppressed_at: tuple[MetadataWrapper, dict[int, Codes]] | None = None
    _index: tuple[MetadataWrapper, ModuleIndex] | None = None
    #: What the file's local imports define (the project view), if known.
    project: ProjectFacts | None = None
    _qualnames: tuple[MetadataWrapper, LazyQualifiedNames] | None = None
    #: The statements generated for this file's trees: a changed tree's
    #: positions generate only its new statements (``positions``).
    position_chunks: positions.Chunks = field(default_factory=positions.Chunks)
    #: The parents of the latest changed tree, kept up to date (``tree_parents``).
    tree_parents: TreeParents = field(default_factory=TreeParents)
    #: The parsed module's positions: a node a later tree shares with it (every
    #: subtree no rule changed) is where the user wrote it, with no code
    #: generated for that tree and no line map.
    original_positions: Mapping[cst.CSTNode, Any] = field(default_factory=dict)
    #: The parsed module's wrapper: ``original_index`` (what ``Rule.applies``
    #: gates read) is its index.
    original_wrapper: MetadataWrapper | None = None
    _original_index: ModuleIndex | None = None
    #: The divergence analysis's statement walks, reused on this file's later
    #: trees where they hold (``divergence_memo``).
    divergence_memo: DivergenceMemo = field(default_factory=DivergenceMemo)
    #: Facts of a function's own syntax, kept for this file's later trees
    #: (``function_syntax``).
    function_syntax: FunctionSyntax = field(default_factory=FunctionSyntax)

    @property
    def original_index(self) -> ModuleIndex:
        """The parsed tree's ModuleIndex (the first rules' index, kept after a
        rule changes the tree)."""
        if self._original_index is None:
            wrapper = self.original_wrapper
            assert wrapper is not None, "no parsed tree given"
            if self._index is None or self._index[0] is wrapper:
                return self.index_of(wrapper)
            # A later tree's index stays the current one.
            self._original_index = self._new_index(
                wrapper,
                LazyQualifiedNames(wrapper.resolve(ScopeProvider), self.reexports),
            )
        return self._original_index

    def original_start(
        self, wrapper: MetadataWrapper, node: cst.CSTNode
    ) -> tuple[int, int]:
        """The user's (line, 0-based column) where ``node`` (a node of
        ``wrapper``'s tree) starts."""
        found = self.original_positions.get(node)
        if found is not None:
            start = found.start
            return start.line, start.column
        start = self.positions_of(wrapper)[node].start
        return self.original_place(self.code_of(wrapper), start.line, start.column)

    def index_of(self, wrapper: MetadataWrapper) -> ModuleIndex:
        """The ModuleIndex of ``wrapper``'s module (derived data: shared by rules)."""
        if self._index is None or self._index[0] is not wrapper:
            if wrapper is self.original_wrapper and self._original_index is not None:
                self._index = (wrapper, self._original_index)
                return self._original_index
            self._index = (
                wrapper,
                self._new_index(wrapper, self.qualified_names_of(wrapper)),
            )
        if wrapper is self.original_wrapper:
            self._original_index = self._index[1]
        return self._index[1]

    def _new_index(
        self, wrapper: MetadataWrapper, qualnames: LazyQualifiedNames
    ) -> ModuleIndex:
        index = ModuleIndex(wrapper, self.alias, qualnames, project=self.project)
        index.divergence_memo = self.divergence_memo
        index._function_syntax = self.function_syntax
        # Its code is the parsed source, or generated with the tree's positions
        # (only the statements no earlier tree generated), not by a whole
        # ``Module.code`` of each changed tree.
        if positions.SHARED_CODE:
            index.code_source = lambda: self.code_of(wrapper)
        return index

    @property
    def reexports(self) -> dict[str, str]:
        """The project's re-exported library names (``project_reexports``)."""
        return dict(self.project.reexports) if self.project is not None else {}

    def qualified_names_of(self, wrapper: MetadataWrapper) -> LazyQualifiedNames:
        if self._qualnames is None or self._qualnames[0] is not wrapper:
            self._qualnames = (
                wrapper,
                LazyQualifiedNames(wrapper.resolve(ScopeProvider), self.reexports),
            )
        return self._qualnames[1]

    def positions_of(self, wrapper: MetadataWrapper) -> Mapping[cst.CSTNode, Any]:
        """``wrapper``'s positions; computed here, they come with its code."""
        known = wrapper._metadata.get(PositionProvider)  # type: ignore[attr-defined]
        if known is not None:
            return known
        found, code = positions.compute(wrapper, self.position_chunks)
        self._code = (wrapper.module, code)
        return found

    def code_of(self, wrapper: MetadataWrapper) -> str:
        """The code of ``wrapper``'s module (asked with positions: ``report``)."""
        module = wrapper.module
        if module is self.original_module:
            return self.original_code
        if self._code is None or self._code[0] is not module:
            if PositionProvider in wrapper._metadata:  # type: ignore[attr-defined]
                self._code = (module, module.code)
            else:
                self.positions_of(wrapper)
        return self._code[1]  # type: ignore[index]

    def suppressed_of(self, wrapper: MetadataWrapper) -> dict[int, Codes]:
        """The statements of ``wrapper``'s module marked ``# accel-migrate: skip``.
        No rule writes that comment: without one in the user's code, no tree has
        one, and no tree's code is generated to look for it."""
        if not (self.honour_suppressions and SKIP_COMMENT.search(self.original_code)):
            return {}
        if self._suppressed_at is None or self._suppressed_at[0] is not wrapper:
            found = (
                suppressed_statements(wrapper.module)
                if SKIP_COMMENT.search(self.code_of(wrapper))
                else {}
            )
            self._suppressed_at = (wrapper, found)
        return self._suppressed_at[1]

    def aliased(self, message: str) -> str:
        """``message`` naming the runtime by the alias this file's import uses
        (``accel_rt.backward`` where ``accel`` was taken)."""
        if self.alias == "accel" or "accel." not in message:
            return message
        return _RUNTIME_NAME.sub(self.alias + ".", message)

    def runs(self, code: str) -> bool:
        return not self.running or code in self.running

    def block(self, finding: Finding) -> None:
        """Leave the whole file unchanged, for the reason ``finding`` gives.

        For a training setup that cannot be migrated whole (a trained model that is
        not prepared): sharding its data or rewriting its backward alone would
        make every process train its own copy. The rules still run (their other
        needs-review findings are reported); the engine then hands back the
        original source with the needs-review findings only.
        """
        if finding.status != "needs-review":
            raise ValueError("a blocking finding is a needs-review finding")
        self.findings.append(finding)
        self.blocking.append(finding)

    def kept_findings(self) -> list[Finding]:
        """The findings, less those inside suppressed statements, and less a second
        ``fixed`` report of one rule at one place with the same result (an inner
        expression rewritten as part of the outer one)."""
        kept: list[Finding] = []
        fixed_at: set[tuple[int, int, str, str]] = set()
        for f in self.findings:
            if any(
                first <= f.line <= last
                and applies(self.suppressed_codes.get((first, last)), f.code)
                for first, last in self.suppressed
            ):
                continue
            if f.status == "fixed":
                place = (f.line, f.column, f.code, f.message.rpartition("->")[2])
                if place in fixed_at:
                    continue
                fixed_at.add(place)
            kept.append(f)
        return kept

    def original_line(self, current_code: str, line: int) -> int:
        return self.original_place(current_code, line, 0)[0]

    def original_place(
        self, current_code: str, line: int, column: int
    ) -> tuple[int, int]:
        """The user's (line, 0-based column) for a place in ``current_code``."""
        if current_code == self.original_code:
            return line, column
        if self._linemap is None or self._linemap[0] != current_code:
            self._linemap = (current_code, LineMap(self.original_code, current_code))
        return self._linemap[1].original_place(line, column)
