"""Sharding keeps the original's global batches: disjoint slices that cover them,
the same order on every rank even when ranks' RNG states differ."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from accel_migrate.runtime.data import (
    GlobalBatchSlices,
    PerDeviceBatches,
    ShardingError,
    chunk_bounds,
    empty_like_batch,
    shard_loader,
)

from .fakes import FakeRuntime


@pytest.mark.parametrize("size", [0, 1, 2, 5, 16, 17])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_chunks_are_disjoint_and_cover_the_batch(size: int, world: int) -> None:
    covered: list[int] = []
    bounds = [chunk_bounds(size, world, rank) for rank in range(world)]
    for lo, hi in bounds:
        covered.extend(range(lo, hi))
    assert covered == list(range(size))
    lengths = [hi - lo for lo, hi in bounds]
    assert max(lengths) - min(lengths) <= 1
    assert lengths == sorted(
        lengths, reverse=True
    ), "earlier ranks take the extra samples"


def _original_batches(loader: DataLoader, seed: int) -> list[list[int]]:
    torch.manual_seed(seed)
    return [list(batch) for batch in loader.batch_sampler]


def _rank_slices(
    loader: DataLoader, world: int, seed: int, drift: bool
) -> list[list[list[int]]]:
    """Each simulated rank's batches; rank 0 starts from the seeded RNG state, the
    others from a drifted one (as after dropout on different data)."""
    published: dict = {}
    per_rank = []
    for rank in range(world):
        torch.manual_seed(seed if (rank == 0 or not drift) else seed + 100 + rank)
        sampler = GlobalBatchSlices(loader.batch_sampler, FakeRuntime(rank, world, published))  # type: ignore[arg-type]
        per_rank.append([list(b) for b in sampler])
    return per_rank


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("drift", [False, True])
def test_slices_reassemble_the_original_batches(world: int, drift: bool) -> None:
    loader = DataLoader(TensorDataset(torch.arange(37)), batch_size=8, shuffle=True)
    expected = _original_batches(loader, seed=5)
    per_rank = _rank_slices(loader, world, seed=5, drift=drift)
    assert all(
        len(batches) == len(expected) for batches in per_rank
    ), "same number of steps on every rank"
    for step, batch in enumerate(expected):
        reassembled = [index for rank in range(world) for index in per_rank[rank][step]]
        lo, hi = chunk_bounds(len(batch), world, world - 1)
        if hi == lo:  # the last rank's placeholder sample for an empty share
            reassembled = reassembled[:-1]
        assert reassembled == batch


def test_rank_zero_rng_advances_like_the_original() -> None:
    loader = DataLoader(TensorDataset(torch.arange(20)), batch_size=4, shuffle=True)
    torch.manual_seed(11)
    list(loader.batch_sampler)
    after_original = torch.get_rng_state()
    torch.manual_seed(11)
    list(GlobalBatchSlices(loader.batch_sampler, FakeRuntime(0, 2, {})))  # type: ignore[arg-type]
    assert torch.equal(torch.get_rng_state(), after_original)


def test_every_rank_goes_on_from_the_state_the_original_draw_left() -> None:
    """Rank 1 (drifted) ends the epoch's draw in rank 0's state, the original's,
    so that draws made for the global batch (accel.batch_draw) agree."""
    loader = DataLoader(TensorDataset(torch.arange(20)), batch_size=4, shuffle=True)
    torch.manual_seed(1)
    list(loader.batch_sampler)
    original = torch.get_rng_state()
    published: dict = {}
    torch.manual_seed(1)
    list(GlobalBatchSlices(loader.batch_sampler, FakeRuntime(0, 2, published)))  # type: ignore[arg-type]
    assert torch.equal(torch.get_rng_state(), original)
    torch.manual_seed(99)
    list(GlobalBatchSlices(loader.batch_sampler, FakeRuntime(1, 2, published)))  # type: ignore[arg-type]
    assert torch.equal(torch.get_rng_state(), original)


def test_disagreeing_samplers_fall_back_to_rank_zero_batches() -> None:
    loader = DataLoader(TensorDataset(torch.arange(12)), batch_size=4, shuffle=False)
    published: dict = {"gathered": [((1, 3), 1), ((1, 3), 2)]}  # the digests differ
    rank0 = GlobalBatchSlices(loader.batch_sampler, FakeRuntime(0, 2, published))  # type: ignore[arg-type]
    rank0._global_batches()
    rank1 = GlobalBatchSlices([[9, 9, 9, 9]], FakeRuntime(1, 2, published))  # type: ignore[arg-type]
    assert rank1._global_batches() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_ranks_starting_different_epochs_fail_on_every_rank() -> None:
    """Rank 1 stopped early on a rank-local metric and iterates the test loader
    while rank 0 starts another training epoch: a clear error, not wrong samples."""
    loader = DataLoader(TensorDataset(torch.arange(12)), batch_size=4)
    published: dict = {"gathered": [((3, 3), 7), ((1, 1), 8)]}
    sampler = GlobalBatchSlices(loader.batch_sampler, FakeRuntime(0, 2, published))  # type: ignore[arg-type]
    with pytest.raises(ShardingError, match="different paths") as error:
        sampler._global_batches()
    assert "rank 1: epoch 1 of a loader of 1 batches" in str(error.value)


def test_loader_reports_each_steps_share_and_empties_a_missing_share() -> None:
    dataset = TensorDataset(torch.arange(9).float().unsqueeze(1), torch.arange(9))
    published: dict = {}
    loaders = []
    for rank in range(2):
        runtime = FakeRuntime(rank, 2, published)
        loaders.append((runtime, shard_loader(DataLoader(dataset, batch_size=4), runtime)))  # type: ignore[arg-type]
    batches = {rank: list(loader) for rank, (_, loader) in enumerate(loaders)}
    assert [len(x) for x, _ in batches[0]] == [2, 2, 1]
    assert [len(x) for x, _ in batches[1]] == [2, 2, 0]
    assert batches[1][2][0].shape == (0, 1), "an empty batch keeps its structure"
    assert loaders[0][0].shares == [(2, 4), (2, 4), (1, 1)]
    assert loaders[1][0].shares == [(2, 4), (2, 4), (0, 1)]
    seen = sorted(int(v) for rank in batches for _, y in batches[rank] for v in y)
    assert seen == list(range(9)), "no sample dropped or duplicated"
    assert len(loaders[0][1]) == 3
    assert loaders[0][1].dataset is dataset


def test_per_device_mode_takes_whole_batches() -> None:
    loader = DataLoader(TensorDataset(torch.arange(10)), batch_size=2)
    published: dict = {}
    shares = []
    for rank in range(2):
        sampler = PerDeviceBatches(loader.batch_sampler, FakeRuntime(rank, 2, published, "per-device"))  # type: ignore[arg-type]
        shares.append([list(b) for b in sampler])
        assert len(sampler) == len(shares[-1])
    assert shares[0] == [[0, 2], [4, 6], [8]]
    assert shares[1] == [[1, 3], [5, 7], [9]]


def test_empty_like_batch_structures() -> None:
    Pair = namedtuple("Pair", "x y")
    batch = {
        "x": torch.ones(3, 2),
        "names": ["a", "b", "c"],
        "pair": Pair(torch.ones(3), torch.zeros(3)),
    }
    empty = empty_like_batch(batch)
    assert empty["x"].shape == (0, 2)
    assert empty["names"] == []
    assert isinstance(empty["pair"], Pair) and empty["pair"].x.shape == (0,)
    with pytest.raises(ShardingError, match="empty batch"):
        empty_like_batch(object())


def test_iterable_datasets_are_refused_with_a_reason() -> None:
    class Stream(IterableDataset):
        def __iter__(self):
            yield from range(3)

    with pytest.raises(ShardingError, match="IterableDataset"):
        shard_loader(DataLoader(Stream(), batch_size=2), FakeRuntime(0, 2, {}))  # type: ignore[arg-type]


def test_two_loaders_iterated_together_draw_in_the_original_order() -> None:
    """``zip(source_loader, target_loader)``: the original draws both worker
    seeds at ``iter()`` and each order at the first batch; sharded loaders draw
    in the same order, so both get the original's batches."""
    source = TensorDataset(torch.arange(12))
    target = TensorDataset(torch.arange(100, 108))

    def pairs(make: Any) -> list[tuple[list[int], list[int]]]:
        torch.manual_seed(3)
        a, b = make(DataLoader(source, batch_size=4, shuffle=True)), make(
            DataLoader(target, batch_size=4, shuffle=True)
        )
        return [(x.tolist(), y.tolist()) for (x,), (y,) in zip(a, b, strict=False)]

    expected = pairs(lambda loader: loader)
    found = pairs(lambda loader: shard_loader(loader, FakeRuntime(0, 1, {})))  # type: ignore[arg-type]
    assert found == expected
    assert len(expected) == 2


def test_a_batch_size_below_the_world_stops_at_its_first_batch() -> None:
    """``DataLoader(ds)`` (batch size 1) at two processes: every step leaves one
    process with nothing; its first batch stops every process with an error
    naming the batch size, the world size and the fixes (a crash of the empty
    forward, far from the cause, otherwise)."""
    from accel_migrate.runtime.small_batches import BatchSmallerThanWorldError

    dataset = TensorDataset(torch.arange(6).float().unsqueeze(1))
    published: dict = {}
    for rank in range(2):
        runtime = FakeRuntime(rank, 2, published)
        loader = shard_loader(DataLoader(dataset), runtime)  # type: ignore[arg-type]
        with pytest.raises(BatchSmallerThanWorldError) as caught:
            next(iter(loader))
        message = str(caught.value)
        assert "batch size is 1, smaller than the 2 processes" in message
        assert "batch mode 'per-device'" in message
        # the launcher's real flag, and what it changes
        assert "`accel-migrate launch --batch-mode per-device`" in message
        assert "a global batch of 2, so the losses differ" in message
        assert isinstance(caught.value, ShardingError)
        assert runtime.shares == [], "refused before the batch reached the script"


def test_a_short_last_batch_below_the_world_is_still_carried() -> None:
    dataset = TensorDataset(torch.arange(7).float().unsqueeze(1))
    published: dict = {}
    for rank in range(4):
        loader = shard_loader(DataLoader(dataset, batch_size=6), FakeRuntime(rank, 4, published))  # type: ignore[arg-type]
        sizes = [len(x) for (x,) in loader]
        assert sizes == ([2, 1] if rank == 0 else [2 if rank == 1 else 1, 0])


def test_a_batch_sampler_whose_every_batch_is_below_the_world_is_refused() -> None:
    from accel_migrate.runtime.small_batches import BatchSmallerThanWorldError

    dataset = TensorDataset(torch.arange(4).float().unsqueeze(1))
    pairs = [[0, 1], [2, 3]]
    loader = shard_loader(DataLoader(dataset, batch_sampler=pairs), FakeRuntime(0, 3, {}))  # type: ignore[arg-type]
    with pytest.raises(
        BatchSmallerThanWorldError, match="batch size is 2, smaller than the 3"
    ):
        list(loader)
    uneven = [[0, 1, 2], [3]]  # one short batch: carried
    loader = shard_loader(DataLoader(dataset, batch_sampler=uneven), FakeRuntime(0, 3, {}))  # type: ignore[arg-type]
    assert [len(x) for (x,) in loader] == [1, 1]


def test_a_batch_sampler_of_one_short_batch_is_carried() -> None:
    """An epoch of one batch below the world (``batch_sampler=[[0]]``) is a
    short last batch, as the same data with ``batch_size=64`` is."""
    dataset = TensorDataset(torch.arange(4).float().unsqueeze(1))
    loader = shard_loader(DataLoader(dataset, batch_sampler=[[0]]), FakeRuntime(0, 3, {}))  # type: ignore[arg-type]
    assert [len(x) for (x,) in loader] == [1]
