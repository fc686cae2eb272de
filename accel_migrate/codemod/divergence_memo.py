"""The divergence analysis's statements reused across the trees of one file.

A rule's pass shares every subtree it did not change with the tree before
(``fasttransform``), so most statements of a changed tree are the very objects
the analysis walked on an earlier tree. Walking a statement (``Divergence.
_statement``) is a function of

- the statement's own subtree (its nodes' ancestors inside it, its syntax),
- the walk's state when it starts: the rank-local names, whether the statement
  or a block around it in its function is divergent (follows a rank-dependent
  exit, is in a branch on a rank-local test), the function's ``global`` names,
  whether it is a method and whether the module's own code is walked
  (``Trace.key``),
- the answers of a few questions about the rest of the tree: is an iterable a data
  loader (``loader_loop``), does a name hold one, does a subscript read a per-process
  environment variable (``os.environ["RANK"]``), which command-line options
  default to one (``rank_local_options``), what a call is (the same on
  every rank, rank-local by itself, which local function it runs and whether that
  function returns a rank-local value), which function a ``return`` is in.

A walk records those answers and what it added to the analysis's results (the
divergent blocks, the rank-local increments, stores, calls and reads, the
tainted returns, globals and attributes), in order: a ``Trace``. On a later
tree (or in the fixpoint's next round) a statement with the same key whose
recorded questions get the same answers there would be walked to the same
additions, and they are made without walking (``replay``). Any different
answer, and the statement is walked again. A statement nested in a block is
reused the same way on its first walk in a round (``NESTED``): a changed
top-level statement (the training loop a rule rewrote) replays its unchanged
inner statements, and its own trace holds theirs. ``REUSE = False`` walks every
statement (``tests/codemod/test_divergence_reuse.py`` compares the two).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from . import subtrees

if TYPE_CHECKING:
    from .divergence import Divergence

#: False: no statement's walk is reused (every analysis walks every statement).
REUSE = True
#: False: only top-level statements' walks (a function's or the module's own
#: statements) are reused; a changed one walks every statement in it again.
NESTED = True

# Questions (the answer recorded after the node).
LOOP = 0  # (LOOP, iterable, loader_loop answer)
HOLDS = 1  # (HOLDS, target, holds a loader)
CALL = 2  # (CALL, call, stop, hit, callee returns rank-local: None if no callee)
ENCLOSING = 3  # (ENCLOSING, return statement, in a function)
ENVIRON = 4  # (ENVIRON, subscript, reads a per-process environment variable)
OPTIONS = 5  # (OPTIONS, assignment, the rank-local options of a namespace it binds)
HANDED = 6  # (HANDED, call, callee, ((parameter, argument, hands a rank), ...))
# Additions to the analysis's results.
DIVERGENT = 10
DIVERGENT_ALL = 11
INCREMENT = 12
MUTATION = 13
STORE = 14
LOCAL_CALL = 15
READ = 16
VALUES = 17  # (VALUES, call, leaves)
RETURN = 18  # (RETURN, return statement): its function returns a rank-local value
GLOBAL = 19
ATTRIBUTE = 20  # (ATTRIBUTE, "self.x") of the current class
PARAMETER = 21  # (PARAMETER, function, parameter) handed a rank

Key = tuple[frozenset[str], bool, frozenset[str], bool, bool, frozenset[cst.CSTNode]]

#: Traces kept per statement (the fixpoint's rounds and AM008's second analysis
#: start some statements from different states).
_KEEP = 4


@dataclass(frozen=True)
class Trace:
    key: Key
    events: tuple[tuple[Any, ...], ...]
    tainted_after: frozenset[str]


class DivergenceMemo:
    """The traces of the statements walked on one file's trees, and each
    function's ``global`` names."""

    def __init__(self) -> None:
        self.traces: dict[cst.CSTNode, list[Trace]] = {}
        self.declared_globals: dict[cst.FunctionDef, frozenset[str]] = {}
        #: Statements whose walk was reused (counted for the tests).
        self.reused = 0

    def find(
        self, divergence: Divergence, statement: cst.CSTNode, key: Key
    ) -> Trace | None:
        for trace in self.traces.get(statement, ()):
            if trace.key == key and replay(divergence, trace):
                self.reused += 1
                return trace
        return None

    def keep(self, statement: cst.CSTNode, trace: Trace) -> None:
        kept = self.traces.setdefault(statement, [])
        kept.insert(0, trace)
        del kept[_KEEP:]


def walk_nested(
    divergence: Divergence, statement: cst.CSTNode, tainted: set[str]
) -> set[str]:
    """``Divergence._statement`` of a statement in a block of the top-level
    statement being walked, reused as ``_walk_top``'s are (``NESTED``); the
    enclosing statement's trace holds its questions and additions too."""
    events = divergence._events
    if events is None or not (REUSE and NESTED):
        return divergence._statement(statement, tainted)
    key = divergence._key(statement, tainted, nested=True)
    divergence._events = None  # a replay's questions are no events of the walk
    try:
        trace = divergence._memo.find(divergence, statement, key)
    finally:
        divergence._events = events
    if trace is not None:
        events.extend(trace.events)
        return set(trace.tainted_after)
    start = len(events)
    tainted = divergence._statement(statement, tainted)
    trace = Trace(key, tuple(events[start:]), frozenset(tainted))
    divergence._memo.keep(statement, trace)
    return tainted


def inside(statement: cst.CSTNode, nodes: set[cst.CSTNode]) -> frozenset[cst.CSTNode]:
    """The nodes of ``nodes`` under ``statement`` (its blocks an earlier walk of
    it in this round made divergent, which its walk reads)."""
    if not nodes:
        return frozenset()
    preorder = subtrees.preorder_of(statement)
    if preorder is None:
        return frozenset(n for n in nodes if _under(n, statement))
    start, stop = preorder.span(statement)
    position = preorder.position
    return frozenset(n for n in nodes if start < position.get(n, -1) < stop)


def _under(node: cst.CSTNode, statement: cst.CSTNode) -> bool:
    return any(inner is node for inner in _walk(statement))


def _walk(node: cst.CSTNode) -> Any:
    yield node
    for child in node.children:
        yield from _walk(child)


def replay(divergence: Divergence, trace: Trace) -> bool:
    """Make ``trace``'s additions if every question it asked gets the same answer
    in ``divergence`` (its tree, its results so far); else change nothing."""
    from .divergence_parameters import replay_handed

    returns: list[cst.FunctionDef] = []
    for event in trace.events:
        kind = event[0]
        if kind == CALL:
            stop, hit, callee = divergence.static_call(event[1])
            if stop != event[2] or hit != event[3]:
                return False
            if callee is None:
                if event[4] is not None:
                    return False
            elif event[4] is None or event[4] != (
                callee in divergence.tainted_returns or callee in returns
            ):
                return False
        elif kind == LOOP:
            if divergence.index.loader_loop(event[1]) != event[2]:
                return False
        elif kind == ENVIRON:
            if divergence.environment_read(event[1]) != event[2]:
                return False
        elif kind == HOLDS:
            if divergence.holds_loader(event[1]) != event[2]:
                return False
        elif kind == ENCLOSING:
            if (divergence.index.enclosing_function(event[1]) is not None) != event[2]:
                return False
        elif kind == OPTIONS:
            if divergence.index.rank_local_options.bound(event[1]) != event[2]:
                return False
        elif kind == HANDED:
            if not replay_handed(divergence, event):
                return False
        elif kind == RETURN:
            function = divergence.index.enclosing_function(event[1])
            assert function is not None  # asked before (ENCLOSING)
            returns.append(function)
    returned = iter(returns)
    for event in trace.events:
        kind = event[0]
        if kind < DIVERGENT:
            continue
        if kind == DIVERGENT:
            divergence.divergent.add(event[1])
        elif kind == DIVERGENT_ALL:
            divergence.divergent.update(event[1])
        elif kind == INCREMENT:
            divergence.local_increments.add(event[1])
        elif kind == MUTATION:
            divergence.local_mutations.add(event[1])
        elif kind == STORE:
            divergence.local_stores.add(event[1])
        elif kind == LOCAL_CALL:
            divergence.local_calls.add(event[1])
        elif kind == READ:
            divergence.local_reads.add(event[1])
        elif kind == VALUES:
            divergence.local_values[event[1]] = list(event[2])
        elif kind == RETURN:
            divergence.tainted_returns.add(next(returned))
        elif kind == GLOBAL:
            divergence.tainted_globals.add(event[1])
        elif kind == ATTRIBUTE:
            assert divergence.current_class is not None
            divergence.tainted_attributes.add((divergence.current_class, event[1]))
        elif kind == PARAMETER:
            divergence.tainted_parameters.add((event[1], event[2]))
    return True
