"""accel.batch_draw: each rank's rows of the global batch's draw are the rows the
original drew for its samples, and every rank's random state ends where the
original's did."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import torch

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import reset_runtime
from accel_migrate.runtime.data import chunk_bounds

from .fakes import FakeRuntime


class _Stepping(FakeRuntime):
    """A rank of a simulated world whose current step holds ``local`` of ``total``."""

    def __init__(self, rank: int, world: int, total: int, batch_mode: str = "global"):
        super().__init__(rank, world, {}, batch_mode)
        lo, hi = chunk_bounds(total, world, rank)
        self.share = (hi - lo, total)

    def batch_share_known(self) -> bool:
        return True

    def batch_share(self) -> tuple[int, int]:
        return self.share


@contextmanager
def _as_rank(runtime: object) -> Iterator[None]:
    previous = reset_runtime(runtime)  # type: ignore[arg-type]
    try:
        yield
    finally:
        reset_runtime(previous)


@pytest.mark.parametrize("world,total", [(2, 8), (3, 7), (2, 1)])
def test_ranks_rows_are_the_original_draws_rows(world: int, total: int) -> None:
    torch.manual_seed(5)
    original = torch.randn(total, 3)
    after = torch.get_rng_state()
    rows = []
    for rank in range(world):
        torch.manual_seed(5)
        runtime = _Stepping(rank, world, total)
        with _as_rank(runtime):
            local = runtime.share[0]
            rows.append(accel.batch_draw(local, lambda n: torch.randn(n, 3)))
        assert torch.equal(torch.get_rng_state(), after), "the original's state"
    assert torch.equal(torch.cat(rows), original)


def test_like_draws_and_numpy_draws_too() -> None:
    torch.manual_seed(2)
    np.random.seed(2)
    original = torch.randn_like(torch.zeros(5, 2))
    original_np = np.random.normal(0, 1, (5, 4))
    parts, parts_np = [], []
    for rank in range(2):
        torch.manual_seed(2)
        np.random.seed(2)
        runtime = _Stepping(rank, 2, 5)
        with _as_rank(runtime):
            local = runtime.share[0]
            parts.append(accel.batch_draw_like(torch.randn_like, torch.zeros(local, 2)))
            parts_np.append(
                accel.batch_draw(local, lambda n: np.random.normal(0, 1, (n, 4)))
            )
    assert torch.equal(torch.cat(parts), original)
    assert np.array_equal(np.concatenate(parts_np), original_np)


def test_a_count_that_is_not_the_share_draws_as_asked_and_warns() -> None:
    runtime = _Stepping(0, 2, 8)
    with _as_rank(runtime), pytest.warns(RuntimeWarning, match="3 rows asked"):
        torch.manual_seed(0)
        drawn = accel.batch_draw(3, lambda n: torch.randn(n, 2))
    torch.manual_seed(0)
    assert torch.equal(drawn, torch.randn(3, 2))


def test_per_device_batches_and_one_process_draw_as_asked() -> None:
    for runtime in (_Stepping(1, 2, 8, batch_mode="per-device"), None):
        with _as_rank(runtime):
            torch.manual_seed(0)
            drawn = accel.batch_draw(4, lambda n: torch.rand(n))
            like = accel.batch_draw_like(torch.rand_like, torch.zeros(4, 2).t())
        torch.manual_seed(0)
        assert torch.equal(drawn, torch.rand(4))
        assert like.shape == (2, 4)


def test_a_draw_that_ignores_its_row_count_is_an_error() -> None:
    with (
        _as_rank(_Stepping(0, 2, 8)),
        pytest.raises(RuntimeError, match="returned 3 rows"),
    ):
        accel.batch_draw(4, lambda n: torch.randn(3, 2))
