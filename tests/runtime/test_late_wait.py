"""How long a late statement's check waits (``late_registration.same_statement``)
and what it leaves in the store, the processes played by threads over one store.

Before r34d a parameter added on rank 0 only waited the run's whole timeout (1800
s by default) before ``LateRegistrationError``, and a failed round's keys stayed
in the store. Now a process seen past the statement without it (``progress``:
its count of collectives or ``accel.backward`` calls beyond the waiting one's)
fails the round within about a second, a process that gets to the statement
slowly (rank 0 evaluating first) still meets it, and every round's keys go.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import torch.distributed as dist

from accel_migrate.runtime import late_registration, progress
from accel_migrate.runtime.module import LateRegistrationError

ROUND_KEYS = ("0/0", "0/1", "0/2", "0/state", "0/arrived", "0/left", "0/read")


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Any:
    shared = dist.HashStore()
    monkeypatch.setattr(dist.distributed_c10d, "_get_default_store", lambda: shared)
    return shared


def _left(store: Any) -> list[str]:
    return [k for k in ROUND_KEYS if store.check([f"accel_migrate/late/{k}"])]


def _post(store: Any, rank: int, counts: list[int]) -> None:
    store.set(progress.KEY.format(rank), " ".join(map(str, counts)))


def _run(results: dict[int, Any], rank: int, *args: Any, **kwargs: Any) -> None:
    try:
        late_registration.same_statement(*args, **kwargs)
        results[rank] = "ok"
    except LateRegistrationError as exc:
        results[rank] = exc


def test_a_rank_past_the_statement_fails_it_at_once(store: Any) -> None:
    # rank 1 went on to its next collective (4 against rank 0's 3 here) without
    # the statement: rank 0 refuses within a look or two, not the timeout
    _post(store, 1, [0, 4, 2])
    start = time.monotonic()
    with pytest.raises(
        LateRegistrationError,
        match=r"ran on rank\(s\) 0 and rank\(s\) 1 went on without it \(to a "
        r"collective or an `accel.backward` that rank\(s\) 0 reach only after it\)",
    ):
        late_registration.same_statement("m.s = 1", 0, 2, 1800.0, [0, 3, 2])
    assert time.monotonic() - start < 5.0
    assert _left(store) == []  # the failed round's keys are gone
    # and the later statements are refused at once, writing nothing
    with pytest.raises(LateRegistrationError, match="an earlier statement"):
        late_registration.same_statement("m.t = 1", 1, 2, 1800.0, [0, 4, 2])
    assert _left(store) == []


def test_a_backward_past_the_statement_fails_it_too(store: Any) -> None:
    _post(store, 1, [0, 3, 3])
    with pytest.raises(LateRegistrationError, match=r"rank\(s\) 1 went on"):
        late_registration.same_statement("m.s = 1", 0, 2, 1800.0, [0, 3, 2])


def test_a_slow_rank_that_runs_the_statement_meets_it(store: Any) -> None:
    # rank 0 evaluates for a while (no collective: its counts stay at rank 1's)
    # and then runs the statement rank 1 waits in: both go through
    _post(store, 0, [0, 3, 2])
    results: dict[int, Any] = {}
    waiting = threading.Thread(
        target=_run, args=(results, 1, "m.s = 1", 1, 2, 1800.0, [0, 3, 2])
    )
    waiting.start()
    time.sleep(4 * late_registration._LOOK)
    assert waiting.is_alive()
    _run(results, 0, "m.s = 1", 0, 2, 1800.0, [0, 3, 2])
    waiting.join(10)
    assert results == {0: "ok", 1: "ok"}
    assert _left(store) == []


def test_a_failed_round_two_ranks_waited_in_is_deleted_once_both_left(
    store: Any,
) -> None:
    # world 3: ranks 0 and 1 run the statement, rank 2 went on without it
    _post(store, 2, [0, 5, 0])
    results: dict[int, Any] = {}
    threads = [
        threading.Thread(
            target=_run, args=(results, r, "m.s = 1", r, 3, 1800.0, [0, 3, 0])
        )
        for r in (0, 1)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert set(results) == {0, 1}
    for rank in (0, 1):
        assert isinstance(results[rank], LateRegistrationError)
        assert "rank(s) 2 went on without it" in str(results[rank])
    assert _left(store) == []


def test_without_news_of_the_others_the_bound_is_the_runs_timeout(
    store: Any,
) -> None:
    # rank 1 posted nothing (or counts not past the statement): the run's timeout
    _post(store, 1, [0, 3, 2])
    start = time.monotonic()
    with pytest.raises(LateRegistrationError, match="not reached it within 1 s"):
        late_registration.same_statement("m.s = 1", 0, 2, 1.0, [0, 3, 2])
    assert 1.0 <= time.monotonic() - start < 5.0
    assert _left(store) == []


def test_the_counts_are_posted_where_they_stay(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "COUNTS", [0, 7, 1])
    monkeypatch.setattr(progress, "TICK", 0.05)
    monkeypatch.setattr(progress, "_STARTED", [])
    progress.start_poster(store, 3)
    deadline = time.monotonic() + 5
    while progress.read(store, 3) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert progress.read(store, 3) == (0, 7, 1)
