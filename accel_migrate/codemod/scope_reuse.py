"""The scope walk's top-level statements reused across the trees of one file.

A rule's pass shares every subtree it did not change with the tree before
(``fasttransform``), so most top-level statements of a changed tree are the very
objects the scope walk (``scope_walk.ScopeWalk``) went through on an earlier
tree. Walking a top-level statement makes, in order:

- every node of its subtree's entry in the scope mapping (its own scope objects
  for the functions, classes, lambdas and comprehensions inside, the module's
  scope elsewhere),
- its bindings: in its own scopes, and in the module's scope (a ``def``, an
  ``import``, an assignment at module level, a ``global x`` write in a function),
  each numbered by the count of assignment-like nodes before it in its scope,
- its reads (``Access``), resolved after the walk (``infer_accesses``),
- the module scope's count of assignment-like nodes, raised by its own.

That is a function of the statement's subtree and of the module scope's count
when it starts, *as long as* the walk asks nothing of the bindings made so far:
it does only for a qualified name at a call or subscript once a name could start
with ``typing`` (``ScopeWalk.typing``), and a string annotation it parses gives
new nodes each time. A statement walked with ``typing`` off from start to end and
no string parsed is recorded (``Record``): on a later tree of the same file
where it is again a top-level statement, met with ``typing`` off, its records
are made again (``replay``), with fresh scope and binding objects (the earlier
tree's keep theirs: scopes are compared by identity) and the module scope's
numbers shifted to the new count. Its reads are resolved with every other read,
as in a fresh walk. Anything else is walked.

``REUSE = False`` walks every statement; ``tests/codemod/test_scope_reuse.py``
compares every scope mapping a pass computes with a fresh walk's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import libcst as cst

from .scopes import Access, Assignment, GlobalScope, ImportAssignment, Scope

if TYPE_CHECKING:
    from .scope_walk import ScopeWalk

#: False: every top-level statement is walked on every tree.
REUSE = True

_current: ScopeMemo | None = None


def current() -> ScopeMemo | None:
    """The memo of the file being migrated (None: outside a pass, or off)."""
    return _current if REUSE else None


@contextmanager
def per_file() -> Iterator[ScopeMemo]:
    """A memo for the trees of one file's pass (the engine's ``_migrate``)."""
    global _current
    outer = _current
    _current = memo = ScopeMemo()
    try:
        yield memo
    finally:
        _current = outer


class Record:
    """What walking one top-level statement made (see the module docstring)."""

    __slots__ = ("accesses", "bindings", "count", "entries", "module_scope")

    def __init__(
        self,
        module_scope: GlobalScope,
        bindings: list[tuple[Assignment, int]],
        accesses: list[tuple[cst.CSTNode, Scope, int, Any, Any]],
        count: int,
    ) -> None:
        self.module_scope = module_scope
        #: Bindings made in the module's scope, with their number less the count
        #: the statement started from.
        self.bindings = bindings
        #: Reads: (node, scope, number (the module scope's: relative), the
        #: dotted attribute it starts, the string it is in).
        self.accesses = accesses
        #: How much the statement raised the module scope's count.
        self.count = count
        #: The scope mapping's entries, in the walk's order (``ScopeMemo.finish``).
        self.entries: list[tuple[cst.CSTNode, Scope]] = []


class ScopeMemo:
    """The records of one file's scope walks, per top-level statement."""

    def __init__(self) -> None:
        self.records: dict[cst.CSTNode, Record] = {}
        #: Statements recorded by the walk in progress: (statement, record, first
        #: and last+1 entry of the scope mapping).
        self._pending: list[tuple[cst.CSTNode, Record, int, int]] = []
        self.reused = 0
        self.walked = 0

    # -- a walk's top-level statements ---------------------------------------------------
    def statement(self, walk: ScopeWalk, statement: cst.CSTNode) -> None:
        """Walk ``statement`` (a top-level statement of ``walk``'s module), or make
        an earlier walk's records again."""
        if not walk.typing:
            record = self.records.get(statement)
            if record is not None:
                self._replay(walk, record)
                self.reused += 1
                return
        self._walk(walk, statement)

    def _walk(self, walk: ScopeWalk, statement: cst.CSTNode) -> None:
        self.walked += 1
        module_scope = walk.scope
        assert isinstance(module_scope, GlobalScope)
        typing, strings = walk.typing, walk.strings
        start = module_scope._assignment_count
        deferred, computed = len(walk.deferred), len(walk.computed)
        log: list[Assignment] = []
        module_scope._log = log
        try:
            walk.visit(statement, False)
        finally:
            module_scope._log = None
        if typing or walk.typing or walk.strings != strings:
            return
        accesses = [
            (
                access.node,
                access.scope,
                access._index - start if access.scope is module_scope else access._index,
                attribute,
                string,
            )
            for access, attribute, string in walk.deferred[deferred:]
        ]
        record = Record(
            module_scope,
            [(assignment, assignment._index - start) for assignment in log],
            accesses,
            module_scope._assignment_count - start,
        )
        self._pending.append((statement, record, computed, len(walk.computed)))

    def finish(self, walk: ScopeWalk) -> None:
        """After the walk: the recorded statements' entries of the scope mapping (a
        statement's nodes are new keys, so its entries are the ones added while it
        was walked, in order)."""
        if not self._pending:
            return
        items = list(walk.computed.items())
        for statement, record, first, end in self._pending:
            record.entries = items[first:end]
            self.records[statement] = record
        self._pending = []

    # -- replay -------------------------------------------------------------------------
    def _replay(self, walk: ScopeWalk, record: Record) -> None:
        module_scope = walk.scope
        assert isinstance(module_scope, GlobalScope)
        start = module_scope._assignment_count
        old_module = record.module_scope
        new: dict[Scope, Scope] = {old_module: module_scope}

        def scope_of(old: Scope) -> Scope:
            found = new.get(old)
            if found is None:
                found = new[old] = _copy(old, scope_of(old.parent), module_scope)
                found._overwrites = {
                    name: scope_of(target) for name, target in old._overwrites.items()
                }
            return found

        for binding, number in record.bindings:
            found = module_scope._assignments.setdefault(binding.name, {})
            found[_rebind(binding, module_scope, number + start)] = None
        computed = walk.computed
        get = new.get
        for node, old in record.entries:
            scope = get(old)
            computed[node] = scope if scope is not None else scope_of(old)
        deferred = walk.deferred
        for node, old, number, attribute, string in record.accesses:
            access = Access(node, scope_of(old))
            access._index = number + start if old is old_module else number
            deferred.append((access, attribute, string))
        module_scope._assignment_count = start + record.count


def _copy(old: Scope, parent: Scope, module_scope: GlobalScope) -> Scope:
    """A new scope like ``old`` (a function's, class's... inside a recorded
    statement) as the walk left it, under ``parent``: its bindings (new objects),
    no reads yet (``infer_accesses`` records them)."""
    scope = object.__new__(type(old))
    scope.parent = parent
    scope.globals = module_scope
    scope.node = old.node
    scope.name = old.name  # type: ignore[attr-defined]
    scope._name_prefix = old._name_prefix
    scope._assignment_count = old._assignment_count
    scope._accesses_by_node = {}
    scope._assignments = {
        name: {_rebind(a, scope, a._index): None for a in found}  # type: ignore[arg-type]
        for name, found in old._assignments.items()
    }
    return scope


def _rebind(binding: Assignment, scope: Scope, number: int) -> Assignment:
    if type(binding) is ImportAssignment:
        return ImportAssignment(
            binding.name, scope, binding.node, number, binding.as_name
        )
    assert type(binding) is Assignment
    return Assignment(binding.name, scope, binding.node, number)
