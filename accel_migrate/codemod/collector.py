"""The cyclic garbage collector, run less often while a file is migrated.

CPython's collector runs a young-generation collection after every 700 net
allocations of container objects, and every hundredth or so one walks *every*
live container: the imported modules (libcst, the rules) and every tree of the
file, which its memos keep alive while it is migrated. A full pass of one
training script allocates hundreds of thousands of nodes, tuples and dicts, so
the collector walked the same live objects over and over: on the 395-line
profile script 180 young, 16 middle and 2 full collections a pass, 0.24-1.05 s
of CPU of a 1.4-2.2 s pass; over the profile's 30-script tree 2,290
collections, 6.5-7.2 s of 27-30 s (measured with ``gc.callbacks``; round 21 of
issue 14 in docs/performance.md). The pass does leave cyclic garbage (78,000
containers for that script), but that needs one collection, not two hundred.

``held_back()`` raises the young generation's threshold to ``THRESHOLD`` for
the time of a migration (the other two are kept, as is a threshold above ours
or a collector turned off), and puts the caller's back when the last migration
of the process ends (threads migrate side by side: the soundness tests' pool).
The collector still runs: cyclic garbage cannot grow past about
``THRESHOLD`` containers before it is collected (the script's peak traced
memory: 17.5 MB above the start with CPython's thresholds, 15.2 MB with
these). What the engine computes does not depend on when the collector runs: a
later collection only keeps dead objects, and their addresses, longer; the
weak maps keyed by a ``ModuleIndex`` (``reduction``) drop an entry when its
index dies, and no index is asked about after that. The collection that follows a pass (at the caller's pace, once the thresholds
are back) walks what the pass left: its cyclic garbage, 79,000 containers for
that script, 47,000 of them its trees' positions. The engine empties those at
the end of the pass (``positions.Chunks.release``; ``RELEASE = False`` does
not), so they are freed by their reference counts and that collection walks
about 28,000 (37-52 ms against 47-111 ms at a load of 20; round 22).
The scopes of every tree of the pass are emptied the same way
(``release_scopes``; ``RELEASE_SCOPES = False`` does not): the collection
after a pass of that script then finds about 17,600 containers instead of
25,800 (round 23).
``ENABLED = False`` leaves the thresholds alone;
``tests/codemod/test_collector.py`` migrates a sample both ways and compares
the results.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterable
from typing import Any

from .scopes import ScopeProvider

#: The young generation's threshold during a migration (CPython's default: 700).
THRESHOLD = 100_000
#: False: migrations run with the process's thresholds (the equivalence test
#: and ``bench/codemod_profile.py --collector`` compare the two).
ENABLED = True
#: False: a pass leaves its trees' positions to the collector, as before round
#: 22 (``engine._full_pass`` empties them at its end; the equivalence test and
#: ``bench/codemod_profile.py --release`` compare the two).
RELEASE = True
#: False: a pass leaves its trees' scopes to the collector, as before round 23
#: (``engine._full_pass`` empties them at its end with ``release_scopes``).
RELEASE_SCOPES = True

_LOCK = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None


class held_back:
    """Run the body with the young generation's threshold at ``THRESHOLD``.

    A class, not ``contextlib.contextmanager``: that one sets the
    ``__traceback__`` of an exception passing through, which the frozen
    ``MigrationError`` refuses."""

    def __enter__(self) -> None:
        global _depth, _saved
        with _LOCK:
            if _depth == 0 and ENABLED:
                first, second, third = gc.get_threshold()
                # 0: the caller turned collection off; a larger one is theirs.
                if 0 < first < THRESHOLD:
                    _saved = (first, second, third)
                    gc.set_threshold(THRESHOLD, second, third)
            _depth += 1

    def __exit__(self, *exc_info: object) -> None:
        global _depth, _saved
        with _LOCK:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None


def release_scopes(wrappers: Iterable[Any]) -> None:
    """Empty every scope the pass's trees' wrappers computed: the end of a
    file's pass (``engine._full_pass``), nothing reads them after it. A scope
    holds its bindings and reads, and each of them its scope: a cycle per
    scope, which waited for the collection after the pass with the rest of
    its cyclic garbage. Emptied, they are freed by their reference counts
    (round 23 of issue 14)."""
    scopes: set[Any] = set()  # hashed by identity, in C (``identity_hash``)
    for wrapper in wrappers:
        mapping = wrapper._metadata.get(ScopeProvider)
        if mapping is not None:
            scopes.update(mapping.values())
    scopes.discard(None)
    for scope in scopes:
        scope.__dict__.clear()
