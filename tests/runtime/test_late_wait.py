"""How long a late statement's check waits (``late_registration.same_statement``)
and what it leaves in the store, the processes played by threads over one store.

Before r34d a parameter added on rank 0 only waited the run's whole timeout (1800
s by default) before ``LateRegistrationError``, and a failed round's keys stayed
in the store. Now a process seen past the statement without it (``progress``:
its count of collectives or ``accel.backward`` calls beyond the waiting one's)
fails the round within about a second, a process that gets to the statement
slowly (rank 0 evaluating first) still meets it, and every round's keys go.
Since fixp a waiting rank polls without c10d's warnings, and the poster posts
only while a counted call blocks, restarts over a new store, survives a store
error and is stopped by ``comm``'s close.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import torch
import torch.distributed as dist

from accel_migrate.runtime import comm, late_registration, progress
from accel_migrate.runtime.env import DistEnv
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


def test_a_waiting_rank_prints_nothing(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # before fixp the wait polled with `store.wait(..., 0.25 s)`: over a TCP
    # store (torchrun's) c10d printed two `waitForInput ... timed out` warnings
    # per look on every waiting rank (14 lines for a 2 s wait)
    server = dist.TCPStore(
        "127.0.0.1", 0, 1, True, timedelta(seconds=30), wait_for_workers=False
    )
    client = dist.TCPStore("127.0.0.1", server.port, 1, False, timedelta(seconds=30))
    monkeypatch.setattr(dist.distributed_c10d, "_get_default_store", lambda: client)
    _post(client, 1, [0, 3, 2])  # not past: rank 0 waits out its timeout
    with pytest.raises(LateRegistrationError, match="not reached it within 1 s"):
        late_registration.same_statement("m.s = 1", 0, 2, 1.0, [0, 3, 2])
    err = capfd.readouterr().err
    assert "waitForInput" not in err and "c10d" not in err, err


@pytest.fixture
def poster(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """A quick poster's writes, and the poster stopped after the test."""
    monkeypatch.setattr(progress, "COUNTS", [0, 7, 1])
    monkeypatch.setattr(progress, "TICK", 0.02)
    monkeypatch.setattr(progress, "STILL", 0.05)
    monkeypatch.setattr(progress, "_POSTER", [])
    monkeypatch.setattr(progress, "_INSIDE", [0, 0.0])
    writes: list[tuple[str, str]] = []
    yield writes
    progress.stop_poster()


class _Recording:
    """A store that records its writes (and can fail some)."""

    def __init__(self, writes: list[tuple[str, str]], failing: int = 0) -> None:
        self.store = dist.HashStore()
        self.writes = writes
        self.failing = failing

    def set(self, key: str, value: str) -> None:
        if self.failing:
            self.failing -= 1
            raise RuntimeError("the store is busy")
        self.writes.append((key, value))
        self.store.set(key, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _until(test: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not test() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(test())


def test_the_counts_are_posted_where_a_call_blocks(
    poster: list[tuple[str, str]],
) -> None:
    store = _Recording(poster)
    progress.start_poster(store, 3)
    # posted once at the start (every key exists: one multi_get reads them)
    assert poster == [(progress.KEY.format(3), "0 7 1")]
    assert progress.read(store, 3) == (0, 7, 1)
    # slow steps outside the counted calls (a long forward): nothing written
    for _ in range(3):
        progress.collective()
        with progress.inside():
            pass
        time.sleep(0.1)
    assert len(poster) == 1
    # blocked in a collective: posted within a few looks
    progress.collective()
    with progress.inside():
        assert _until(lambda: progress.read(store, 3) == (0, 11, 1))
        time.sleep(0.1)
    assert len(poster) == 2  # once, not at every look
    thread = progress._POSTER[0][0]
    progress.stop_poster()
    assert not thread.is_alive() and progress._POSTER == []


def test_the_poster_keeps_posting_after_a_store_error(
    poster: list[tuple[str, str]],
) -> None:
    store = _Recording(poster)
    progress.start_poster(store, 0)
    store.failing = 3
    progress.collective()
    with progress.inside():
        assert _until(lambda: progress.read(store, 0) == (0, 8, 1))
    assert store.failing == 0 and progress._POSTER[0][0].is_alive()


def test_a_new_store_gets_a_new_poster(poster: list[tuple[str, str]]) -> None:
    # a process that destroys its process group and makes another
    first, second = _Recording(poster), _Recording(poster)
    progress.start_poster(first, 1)
    thread = progress._POSTER[0][0]
    progress.start_poster(first, 1)  # the same store: the same thread
    assert progress._POSTER[0][0] is thread
    progress.start_poster(second, 1)
    assert not thread.is_alive()
    assert progress._POSTER[0][2] is second and progress._POSTER[0][0].is_alive()
    progress.collective()
    with progress.inside():
        assert _until(lambda: progress.read(second, 1) == (0, 8, 1))
    assert progress.read(first, 1) == (0, 7, 1)


def test_the_others_counts_are_read_with_one_multi_get(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for rank in range(4):
        _post(store, rank, [0, rank, 0])
    calls: list[list[str]] = []
    real = store.multi_get

    class _Counting:
        def multi_get(self, keys: list[str]) -> list[bytes]:
            calls.append(keys)
            return real(keys)

        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

    assert late_registration._went_on(
        _Counting(), [f"k/{r}" for r in range(4)], [0, 1, 0]
    ) == [2, 3]
    assert len(calls) == 1


def test_the_poster_stops_before_the_process_group_goes(
    poster: list[tuple[str, str]], tmp_path: Any
) -> None:
    # `comm`'s close stops and joins it before `destroy_process_group` (before
    # fixp the thread posted on, to a store that was gone)
    dist.init_process_group(
        "gloo", store=dist.FileStore(str(tmp_path / "s"), 1), rank=0, world_size=1
    )
    collectives = comm.ProcessGroupCollectives(
        DistEnv(rank=0, world_size=1), torch.device("cpu"), 30.0
    )
    progress.start_poster(dist.distributed_c10d._get_default_store(), 0)
    thread = progress._POSTER[0][0]
    collectives.close()
    assert not dist.is_initialized()
    assert not thread.is_alive() and progress._POSTER == []
