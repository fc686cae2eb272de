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

from . import scopes
from .scopes import Access, Assignment, GlobalScope, ImportAssignment, Scope

if TYPE_CHECKING:
    from .scope_walk import ScopeWalk

#: False: every top-level statement is walked on every tree.
REUSE = True
#: False: only the module's own statements are recorded and replayed.
NESTED = True

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
    """What walking one statement made (see the module docstring)."""

    __slots__ = (
        "accesses",
        "bindings",
        "count",
        "nodes",
        "places",
        "scope",
        "scopes",
        "where",
    )

    def __init__(
        self,
        scope: Scope,
        where: Where,
        bindings: list[tuple[Assignment, int, int]],
        accesses: list[tuple[cst.CSTNode, Scope, int, Any]],
        count: int,
    ) -> None:
        #: The scope the statement was walked in, and what its chain of scopes
        #: up to the module's was (``_where``).
        self.scope = scope
        self.where = where
        #: Bindings made in a scope of that chain: (binding, how far up the chain
        #: its scope is, its number less that scope's count when the statement
        #: started).
        self.bindings = bindings
        #: Reads: (node, scope, number (relative, in the statement's scope), the
        #: dotted attribute it starts).
        self.accesses = accesses
        #: How much the statement raised its scope's count.
        self.count = count
        #: The scope mapping's entries, in the walk's order (``ScopeMemo.finish``):
        #: the nodes, and each one's scope as a place in ``scopes`` (the
        #: statement's scope first, then those made inside it).
        self.nodes: list[cst.CSTNode] = []
        self.places: list[int] = []
        self.scopes: list[Scope] = [scope]


#: A statement's place: its scope's qualified-name prefix, and per scope of its
#: chain (its own, its parent's... the module's) the kind and the ``global`` /
#: ``nonlocal`` names, each with how far up the chain it points.
Where = tuple[str, tuple[tuple[type, tuple[tuple[str, int], ...]], ...]]


def _chain(scope: Scope) -> list[Scope]:
    chain = [scope]
    while not isinstance(scope, GlobalScope):
        scope = scope.parent
        chain.append(scope)
    return chain


def _where(chain: list[Scope]) -> Where | None:
    """None where an overwrite points off the chain (not seen: then no reuse)."""
    kinds = []
    for scope in chain:
        overwrites = ()
        if scope._overwrites:
            places = []
            for name, target in scope._overwrites.items():
                if target not in chain:
                    return None
                places.append((name, chain.index(target)))
            overwrites = tuple(places)
        kinds.append((type(scope), overwrites))
    return chain[0]._name_prefix, tuple(kinds)


class ScopeMemo:
    """The records of one file's scope walks, per statement."""

    def __init__(self) -> None:
        self.records: dict[cst.CSTNode, Record] = {}
        #: Statements recorded by the walk in progress: (statement, record, first
        #: and last+1 entry of the scope mapping).
        self._pending: list[tuple[cst.CSTNode, Record, int, int]] = []
        self.reused = 0
        self.walked = 0

    def start(self) -> None:
        """Before a walk: every binding is logged (``scopes.LOG``)."""
        scopes.LOG = []

    # -- a walk's statements ----------------------------------------------------------
    def statement(self, walk: ScopeWalk, statement: cst.CSTNode) -> None:
        """Walk ``statement`` (one of a module's or block's statements), or make
        an earlier walk's records again."""
        if (
            walk.typing
            or (not NESTED and not isinstance(walk.scope, GlobalScope))
            or walk.last_string is not None
            or walk.top_attribute[-1] is not None
            or walk.in_annotation[-1]
            or walk.in_type_hint[-1]
            or walk.ignored_subscripts
        ):
            walk.visit(statement, False)
            return
        chain = _chain(walk.scope)
        where = _where(chain)
        record = self.records.get(statement)
        if record is not None and where is not None and record.where == where:
            self._replay(walk, record, chain)
            self.reused += 1
            return
        self._walk(walk, statement, chain, where)

    def _walk(
        self,
        walk: ScopeWalk,
        statement: cst.CSTNode,
        chain: list[Scope],
        where: Where | None,
    ) -> None:
        self.walked += 1
        log = scopes.LOG
        assert log is not None
        logged = len(log)
        strings = walk.strings
        counts = [scope._assignment_count for scope in chain]
        deferred, computed = len(walk.deferred), len(walk.computed)
        walk.visit(statement, False)
        if (
            where is None
            or walk.typing
            or walk.strings != strings
            or any(s._assignment_count != n for s, n in zip(chain[1:], counts[1:]))
            # a `global x` / `nonlocal x` statement changes its scope's names
            or _where(chain) != where
        ):
            return
        scope, start = chain[0], counts[0]
        depth = {id(s): d for d, s in enumerate(chain)}
        bindings = []
        for binding in log[logged:]:
            up = depth.get(id(binding.scope))
            if up is not None:
                bindings.append((binding, up, binding._index - counts[up]))
        accesses = []
        for access, attribute, string in walk.deferred[deferred:]:
            assert string is None
            number = access._index
            accesses.append(
                (
                    access.node,
                    access.scope,
                    number - start if access.scope is scope else number,
                    attribute,
                )
            )
        record = Record(
            scope, where, bindings, accesses, scope._assignment_count - start
        )
        self._pending.append((statement, record, computed, len(walk.computed)))

    def finish(self, walk: ScopeWalk) -> None:
        """After the walk: the recorded statements' entries of the scope mapping (a
        statement's nodes are new keys, so its entries are the ones added while it
        was walked, in order)."""
        scopes.LOG = None
        if not self._pending:
            return
        nodes = list(walk.computed)
        values = list(walk.computed.values())
        for statement, record, first, end in self._pending:
            record.nodes = nodes[first:end]
            places = {id(record.scope): 0}
            found = record.scopes
            for scope in values[first:end]:
                if id(scope) not in places:
                    places[id(scope)] = len(found)
                    found.append(scope)
            record.places = [places[id(scope)] for scope in values[first:end]]
            self.records[statement] = record
        self._pending = []

    # -- replay -------------------------------------------------------------------------
    def _replay(self, walk: ScopeWalk, record: Record, chain: list[Scope]) -> None:
        here = chain[0]
        module_scope = chain[-1]
        assert isinstance(module_scope, GlobalScope)
        start = here._assignment_count
        old_chain = _chain(record.scope)
        # by id: a scope's own __hash__ is a Python call
        new: dict[int, Scope] = {id(o): n for o, n in zip(old_chain, chain)}

        def scope_of(old: Scope) -> Scope:
            found = new.get(id(old))
            if found is None:
                found = _copy(old, scope_of(old.parent), module_scope)
                new[id(old)] = found
                found._overwrites = {
                    name: scope_of(target) for name, target in old._overwrites.items()
                }
            return found

        log = scopes.LOG
        assert log is not None
        for binding, up, number in record.bindings:
            target = chain[up]
            found = target._assignments.setdefault(binding.name, {})
            rebound = _rebind(binding, target, number + target._assignment_count)
            found[rebound] = None
            log.append(rebound)
        made = [scope_of(old) for old in record.scopes]
        walk.computed.update(zip(record.nodes, map(made.__getitem__, record.places)))
        deferred = walk.deferred
        old_here = record.scope
        for node, old, number, attribute in record.accesses:
            access = Access(node, here if old is old_here else scope_of(old))
            access._index = number + start if old is old_here else number
            deferred.append((access, attribute, None))
        here._assignment_count = start + record.count


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
