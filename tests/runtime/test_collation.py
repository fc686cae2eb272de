"""A loader's own collate_fn runs on the global batch; each rank keeps its rows, so
padding to a batch's longest sample is the original's (``runtime.collation``)."""

from __future__ import annotations

import warnings
from collections import namedtuple

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from accel_migrate.runtime.collation import (
    _UNSPLIT,
    GlobalCollate,
    needs_global,
    take_rows,
)
from accel_migrate.runtime.data import ShardingError, shard_loader

from .fakes import FakeRuntime

PAD = 0


class Sequences(Dataset):
    """Sequences of lengths 1..6 (their values say which sample they are)."""

    def __init__(self, n: int) -> None:
        self.items = [torch.full((1 + (i * 5) % 6,), i + 1) for i in range(n)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.items[i]


def pad_batch_first(batch: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max(len(s) for s in batch)
    out = torch.full((len(batch), longest), PAD)
    for i, s in enumerate(batch):
        out[i, : len(s)] = s
    return out, torch.tensor([len(s) for s in batch])


def pad_time_first(batch: list[torch.Tensor]) -> torch.Tensor:
    return pad_batch_first(batch)[0].t().contiguous()


def with_token_count(batch: list[torch.Tensor]) -> tuple[torch.Tensor, int]:
    x, lengths = pad_batch_first(batch)
    return x, int(lengths.sum())


def _shard(collate, world: int, n: int = 10, batch_size: int = 4):
    """Each simulated rank's batches of one epoch, and the original's."""
    dataset = Sequences(n)
    original = list(DataLoader(dataset, batch_size=batch_size, collate_fn=collate))
    published: dict = {}
    per_rank = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rank in range(world):
            runtime = FakeRuntime(rank, world, published)
            loader = DataLoader(dataset, batch_size=batch_size, collate_fn=collate)
            per_rank.append(list(shard_loader(loader, runtime)))  # type: ignore[arg-type]
    return original, per_rank, [str(w.message) for w in caught]


@pytest.mark.parametrize("world", [2, 3])
def test_padding_is_the_global_batchs(world: int) -> None:
    original, per_rank, warned = _shard(pad_batch_first, world)
    assert not warned
    for step, (x, lengths) in enumerate(original):
        rows = [per_rank[r][step][0] for r in range(world) if len(per_rank[r][step][0])]
        assert all(
            r.shape[1] == x.shape[1] for r in rows
        ), "padded to the global longest"
        assert torch.equal(torch.cat(rows), x)
        assert torch.equal(
            torch.cat([per_rank[r][step][1] for r in range(world)]), lengths
        )


def test_default_collation_is_left_alone() -> None:
    dataset = Sequences(4)
    loader = DataLoader(dataset, batch_size=2)
    assert not needs_global(loader.collate_fn)
    shard_loader(loader, FakeRuntime(0, 2, {}))  # type: ignore[arg-type]
    assert not isinstance(loader.collate_fn, GlobalCollate)
    assert not loader.batch_sampler.whole  # type: ignore[attr-defined]


def test_sequence_first_padding_is_split_along_the_samples() -> None:
    """``pad_sequence``'s default layout, (time, batch): split along dimension 1."""
    original, per_rank, warned = _shard(pad_time_first, 2)
    assert not warned
    for step, x in enumerate(original):
        parts = [per_rank[r][step] for r in range(2) if per_rank[r][step].shape[1]]
        assert all(p.shape[0] == x.shape[0] for p in parts), "the global longest"
        assert torch.equal(torch.cat(parts, dim=1), x)


def test_an_unsplittable_output_padded_otherwise_stops_the_run() -> None:
    """A count of the whole batch's tokens is no sample's, so the output cannot be
    split; the share collated alone is padded to its own longest, not the global
    batch's: the model would read other padding, so the loader raises."""
    with pytest.raises(ShardingError, match=r"with_token_count.*dimension 1"):
        _shard(with_token_count, 2)


def with_sample_count(batch: list[torch.Tensor]) -> tuple[torch.Tensor, int]:
    """Samples of one length, stacked, and a count of the batch's elements."""
    x = torch.stack([s[:1] for s in batch])
    return x, int(x.numel())


def test_an_output_that_cannot_be_split_falls_back_to_the_share() -> None:
    """Where the share's tensors are padded as the global batch's (here, not at
    all), each rank collates its own share, with a warning naming the
    collate_fn."""
    original, per_rank, warned = _shard(with_sample_count, 2)
    assert warned and "with_sample_count" in warned[0]
    dataset = Sequences(10)
    for step in range(len(original)):
        indices = list(range(step * 4, min(step * 4 + 4, 10)))
        own = with_sample_count(
            [dataset[i] for i in indices[: (len(indices) + 1) // 2]]
        )
        got = per_rank[0][step]
        assert torch.equal(got[0], own[0]) and got[1] == own[1]


def sort_in_place(batch: list[torch.Tensor]) -> tuple[torch.Tensor, list[int]]:
    """The image-captioning tutorial's collate_fn: the list sorted by length in
    place (longest first, for pack_padded_sequence), padded, lengths as a list."""
    batch.sort(key=len, reverse=True)
    x, lengths = pad_batch_first(batch)
    return x, lengths.tolist()


def sort_a_copy(batch: list[torch.Tensor]) -> tuple[torch.Tensor, list[int]]:
    return sort_in_place(sorted(batch, key=len, reverse=True))


@pytest.mark.parametrize("world", [2, 3])
def test_a_collation_sorting_in_place_keeps_the_sorted_global_batch(
    world: int,
) -> None:
    """Each rank's rows of the global batch sorted by length are its share: the
    ranks' rows joined are the original's batch, padded to its longest, and each
    rank's lengths are still in descending order."""
    original, per_rank, warned = _shard(sort_in_place, world)
    assert not warned
    for step, (x, lengths) in enumerate(original):
        parts = [per_rank[r][step] for r in range(world) if per_rank[r][step][1]]
        assert all(p[0].shape[1] == x.shape[1] for p in parts), "global longest"
        assert torch.equal(torch.cat([p[0] for p in parts]), x)
        assert [n for p in parts for n in p[1]] == lengths
        assert all(p[1] == sorted(p[1], reverse=True) for p in parts)


@pytest.mark.parametrize("world", [2, 3])
def test_a_collation_sorting_a_copy_keeps_the_sorted_global_batch(world: int) -> None:
    """Sorting a copy leaves no trace in the list of which samples took the
    share's places: each row is matched to the sample that gives it collated
    alone, and the rows are the sorted global batch's, as for an in-place sort."""
    original, per_rank, warned = _shard(sort_a_copy, world)
    assert not warned
    for step, (x, lengths) in enumerate(original):
        parts = [per_rank[r][step] for r in range(world) if per_rank[r][step][1]]
        assert all(p[0].shape[1] == x.shape[1] for p in parts), "global longest"
        assert torch.equal(torch.cat([p[0] for p in parts]), x)
        assert [n for p in parts for n in p[1]] == lengths


def normalise_over_batch(batch: list[torch.Tensor]) -> torch.Tensor:
    """Samples of one length, centred on the batch's mean: no row is a sample's
    own, collated alone or in a share."""
    x = torch.stack([s[:1].float() for s in batch])
    return x - x.mean(0)


def centre_pairs(batch: list[torch.Tensor]) -> torch.Tensor:
    """A collation that refuses a batch of one sample (it centres by the batch's
    spread), with padding: its failure on one sample is no failure of the run."""
    if len(batch) < 2:
        raise ValueError("needs two samples")
    return pad_batch_first(sorted(batch, key=len, reverse=True))[0]


def test_a_collation_refusing_one_sample_is_not_matched_by_samples() -> None:
    with pytest.raises(ShardingError, match="centre_pairs"):
        _shard(centre_pairs, 2, n=8)


def test_rows_that_no_sample_gives_alone_are_not_matched() -> None:
    """A collation that mixes the batch's samples falls back to each rank's own
    share (with the warning), not to rows matched by chance."""
    _, per_rank, warned = _shard(normalise_over_batch, 2)
    assert warned and "normalise_over_batch" in warned[0]
    dataset = Sequences(10)
    first = normalise_over_batch([dataset[i] for i in range(2)])
    assert torch.equal(per_rank[0][0], first)


def joined_targets(
    batch: list[torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CTC's layout: padded inputs, the targets joined in one 1-D tensor, and
    the targets' lengths."""
    x, lengths = pad_batch_first(batch)
    return x, torch.cat(batch), lengths


@pytest.mark.parametrize("world", [2, 3])
def test_joined_targets_are_cut_at_their_lengths(world: int) -> None:
    """The joined tensor is not one entry per sample: each rank takes its
    samples' entries, at the offsets of the lengths beside it."""
    original, per_rank, warned = _shard(joined_targets, world)
    assert not warned
    for step, (x, joined, lengths) in enumerate(original):
        parts = [per_rank[r][step] for r in range(world) if len(per_rank[r][step][2])]
        assert all(p[0].shape[1] == x.shape[1] for p in parts), "the global longest"
        assert torch.equal(torch.cat([p[1] for p in parts]), joined)
        assert torch.equal(torch.cat([p[2] for p in parts]), lengths)
        for p in parts:
            assert p[1].shape[0] == int(p[2].sum())
            assert torch.equal(p[1], torch.cat([s[s != PAD] for s in p[0]]))


def test_a_collation_that_draws_keeps_the_random_state() -> None:
    """The first batch is collated twice (the check); the random state after it is
    that of one collation of the global batch, the original's."""

    def noisy(batch):
        x, _ = pad_batch_first(batch)
        return x.float() + torch.randn(x.shape)

    samples = [Sequences(4)[i] for i in range(4)]
    torch.manual_seed(0)
    noisy(samples)
    expected = torch.get_rng_state()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GlobalCollate(noisy, 2, 0)(samples)
    assert torch.equal(torch.get_rng_state(), expected)


def test_take_rows_structures() -> None:
    Pair = namedtuple("Pair", "x y")
    batch = {
        "x": torch.arange(8).view(4, 2),
        "ids": ["a", "b", "c", "d"],
        "pair": Pair(torch.arange(4), torch.zeros(4, 3)),
        "boxes": (
            torch.zeros(2, 4),
            torch.zeros(1, 4),
            torch.zeros(3, 4),
            torch.zeros(0, 4),
        ),
        "none": None,
    }
    rows = take_rows(batch, 1, 3, 4)
    assert torch.equal(rows["x"], batch["x"][1:3])
    assert rows["ids"] == ["b", "c"]
    assert isinstance(rows["pair"], Pair) and torch.equal(
        rows["pair"].x, torch.tensor([1, 2])
    )
    assert [b.shape[0] for b in rows["boxes"]] == [1, 3], "one tensor per sample"
    assert rows["none"] is None
    assert take_rows(torch.zeros(3, 4), 0, 2, 4).shape == (3, 2), "sequence first"
    assert take_rows(torch.zeros(3, 5), 0, 2, 4) is _UNSPLIT, "no samples' dimension"
    assert take_rows((torch.zeros(4), 7), 0, 2, 4) is _UNSPLIT, "a value of the batch"
