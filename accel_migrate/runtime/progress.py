"""How far this process has got: counts of the runtime's calls that every process
makes in the same order, posted to the process group's store while it is blocked
in one of them.

A statement that adds a parameter late waits for the other processes to run it
too (``late_registration.same_statement``). One that never will is often blocked
in the next collective of its own script, which it reached without the statement
(``if rank == 0:`` around it): the waiting one would otherwise wait out the run's
timeout (1800 s by default) before it says so. Every process counts the
runtime's collectives (``comm.ProcessGroupCollectives``) and ``accel.backward``
calls (whose DDP/FSDP reductions need every process), and the statements of
``same_statement`` it has entered (its rounds). A process whose count of
collectives or backward calls is past the waiting one's count at the statement,
and whose count of rounds has not reached the statement's round, reached a call
that the waiting process makes only after the statement: it went on without it
(counted in program order, so a process that runs the statement, however slowly
it gets there, never shows such a count).

What it costs: two integer increments and a flag (``inside``) per call, one
store write when the poster starts (so every process's key exists and the
waiting one reads them all with one ``multi_get``), and a daemon thread that
wakes twice a second and posts the counts (one store write) only where the
main program has been inside one counted call for ``STILL`` seconds (blocked
there), and only counts it has not posted yet: a run whose steps are slow
(a long forward) but whose collectives return writes nothing per step. The
thread is stopped by ``stop_poster`` (``comm``'s ``close``, before the process
group goes), and started anew over a new store (a process that destroys its
process group and makes another).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Counts of this process: [rounds of same_statement entered, collectives, backwards].
COUNTS = [0, 0, 0]
ROUNDS, COLLECTIVES, BACKWARDS = 0, 1, 2
#: The store's key of a process's posted counts (``KEY.format(rank)``).
KEY = "accel_migrate/late/at/{}"
#: How often the poster looks at the counts (seconds).
TICK = 0.5
#: How long the program must have been inside a counted call before the
#: poster posts (seconds): blocked there, most likely waiting for the others.
STILL = 0.5
#: [how deep inside counted calls the program is, when it entered the outermost].
_INSIDE: list[Any] = [0, 0.0]
#: The running poster: (its thread, its stop event, its store), or empty.
_POSTER: list[tuple[threading.Thread, threading.Event, Any]] = []


def collective() -> None:
    """A runtime collective (every process makes the same ones, in order)."""
    COUNTS[COLLECTIVES] += 1


def backward() -> None:
    """An ``accel.backward`` call (every process makes as many, in order)."""
    COUNTS[BACKWARDS] += 1


@contextmanager
def inside() -> Iterator[None]:
    """Around a counted call (a collective, ``accel.backward``): the poster
    posts only while the program has been inside one for ``STILL`` seconds."""
    if _INSIDE[0] == 0:
        _INSIDE[1] = time.monotonic()
    _INSIDE[0] += 1
    try:
        yield
    finally:
        _INSIDE[0] -= 1


def read_all(store: Any, ranks: list[int]) -> dict[int, tuple[int, int, int]]:
    """The counts ``ranks`` last posted, by rank (one ``multi_get`` where every
    one has posted, as each does when its poster starts; a rank that has not
    is left out)."""
    keys = [KEY.format(r) for r in ranks]
    if not keys:
        return {}
    if not store.check(keys):
        ranks = [r for r, k in zip(ranks, keys, strict=True) if store.check([k])]
        keys = [KEY.format(r) for r in ranks]
        if not keys:
            return {}
    found = {}
    for other, value in zip(ranks, store.multi_get(keys), strict=True):
        rounds, collectives, backwards = (int(v) for v in value.split())
        found[other] = (rounds, collectives, backwards)
    return found


def read(store: Any, rank: int) -> tuple[int, int, int] | None:
    """The counts ``rank`` last posted (None where it posted none)."""
    return read_all(store, [rank]).get(rank)


def start_poster(store: Any, rank: int) -> None:
    """Post this process's counts once, and start the thread that posts them
    while the program is blocked in a counted call (once per store: a new
    store, after the process group was made anew, gets a new thread)."""
    if _POSTER and _POSTER[0][2] is store and _POSTER[0][0].is_alive():
        return
    stop_poster()
    _post(store, rank, list(COUNTS))
    stop = threading.Event()
    thread = threading.Thread(
        target=_post_while_blocked,
        args=(store, rank, stop),
        name="accel-migrate-progress",
        daemon=True,
    )
    _POSTER.append((thread, stop, store))
    thread.start()


def stop_poster() -> None:
    """Stop the poster (if one runs) and wait for it: before the process group
    and its store go (``comm``'s ``close``)."""
    while _POSTER:
        thread, stop, _ = _POSTER.pop()
        stop.set()
        if thread is not threading.current_thread():
            thread.join()


def _post(store: Any, rank: int, counts: list[int]) -> None:
    store.set(KEY.format(rank), " ".join(map(str, counts)))


def _post_while_blocked(store: Any, rank: int, stop: threading.Event) -> None:
    posted = list(COUNTS)  # (posted by start_poster)
    while not stop.wait(TICK):
        depth, since = _INSIDE
        if depth == 0 or time.monotonic() - since < STILL:
            continue
        now = list(COUNTS)
        if now == posted:
            continue
        try:
            _post(store, rank, now)
        except Exception:  # (a store error: tried again at the next look)
            continue
        posted = now
