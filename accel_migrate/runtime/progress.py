"""How far this process has got: counts of the runtime's calls that every process
makes in the same order, posted to the process group's store when it stops there.

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

What it costs: two integer increments per call, and a daemon thread (started at
the first distributed prepared model) that wakes twice a second and posts the
counts (one store write) only when they have not moved since its last look,
i.e. where this process is blocked or idle, not at every step.
"""

from __future__ import annotations

import threading
import time
from typing import Any

#: Counts of this process: [rounds of same_statement entered, collectives, backwards].
COUNTS = [0, 0, 0]
ROUNDS, COLLECTIVES, BACKWARDS = 0, 1, 2
#: The store's key of a process's posted counts (``KEY.format(rank)``).
KEY = "accel_migrate/late/at/{}"
#: How often the poster looks at the counts (seconds).
TICK = 0.5
_STARTED: list[threading.Thread] = []


def collective() -> None:
    """A runtime collective (every process makes the same ones, in order)."""
    COUNTS[COLLECTIVES] += 1


def backward() -> None:
    """An ``accel.backward`` call (every process makes as many, in order)."""
    COUNTS[BACKWARDS] += 1


def post_now(store: Any, rank: int) -> None:
    """Post this process's counts to ``store`` now."""
    store.set(KEY.format(rank), " ".join(map(str, COUNTS)))


def read(store: Any, rank: int) -> tuple[int, int, int] | None:
    """The counts ``rank`` last posted (None where it posted none)."""
    key = KEY.format(rank)
    if not store.check([key]):
        return None
    rounds, collectives, backwards = (int(v) for v in store.get(key).split())
    return rounds, collectives, backwards


def start_poster(store: Any, rank: int) -> None:
    """Start (once per process) the thread that posts the counts where they stay."""
    if _STARTED:
        return
    thread = threading.Thread(
        target=_post_when_still,
        args=(store, rank),
        name="accel-migrate-progress",
        daemon=True,
    )
    _STARTED.append(thread)
    thread.start()


def _post_when_still(store: Any, rank: int) -> None:
    seen: list[int] = []
    posted: list[int] = []
    while True:
        time.sleep(TICK)
        now = list(COUNTS)
        if now == seen and now != posted:
            try:
                store.set(KEY.format(rank), " ".join(map(str, now)))
            except Exception:  # the store went away (the job ends): stop posting
                return
            posted = now
        seen = now
