"""A ``collate_fn`` that returns a plain record object (a torchtext-style
``Batch`` with attributes, BiDAF-pytorch's ``batch.c_word``, ``batch.s_idx``,
``batch.id``) is split attribute by attribute, so each rank's padding is the
global batch's (``runtime.collation.record_fields``). Before round t9c such an
output could not be split: each rank collated its own share, padded to the
share's longest, with only a warning."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from accel_migrate.runtime.collation import record_fields
from accel_migrate.runtime.data import ShardingError, shard_loader

from .fakes import FakeRuntime


class Sequences(Dataset):
    """Sequences of lengths 1..6 (their values say which sample they are)."""

    def __init__(self, n: int) -> None:
        self.items = [torch.full((1 + (i * 5) % 6,), i + 1) for i in range(n)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[str, torch.Tensor]:
        return f"q{i}", self.items[i]


class Batch:
    def __init__(self, examples: list[tuple[str, torch.Tensor]]) -> None:
        lengths = torch.tensor([len(s) for _, s in examples])
        words = torch.zeros(len(examples), int(lengths.max()), dtype=torch.long)
        for i, (_, s) in enumerate(examples):
            words[i, : len(s)] = s
        self.c_word = (words, lengths)
        self.s_idx = lengths - 1
        self.id = [q for q, _ in examples]


class CountedBatch(Batch):
    """Also the batch's token count: no sample's value, so not splittable."""

    def __init__(self, examples: list[tuple[str, torch.Tensor]]) -> None:
        super().__init__(examples)
        self.ntokens = int(self.c_word[1].sum())


class TargetlessBatch(Batch):
    """A record whose target is unset in this split (``batch.target = None``)."""

    def __init__(self, examples: list[tuple[str, torch.Tensor]]) -> None:
        super().__init__(examples)
        self.target = None


def _shard(collate, world: int, n: int = 10, batch_size: int = 4):
    dataset = Sequences(n)
    original = list(DataLoader(dataset, batch_size=batch_size, collate_fn=collate))
    per_rank = []
    published: dict = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rank in range(world):
            loader = DataLoader(dataset, batch_size=batch_size, collate_fn=collate)
            runtime = FakeRuntime(rank, world, published)
            per_rank.append(list(shard_loader(loader, runtime)))  # type: ignore[arg-type]
    return original, per_rank, [str(w.message) for w in caught]


@pytest.mark.parametrize("world", [2, 3])
def test_a_record_batch_is_split_by_attribute_with_the_global_padding(
    world: int,
) -> None:
    original, per_rank, warned = _shard(Batch, world)
    assert not warned
    for step, whole in enumerate(original):
        parts = [per_rank[r][step] for r in range(world) if per_rank[r][step].id]
        assert all(type(p) is Batch for p in parts)
        assert all(p.c_word[0].shape[1] == whole.c_word[0].shape[1] for p in parts)
        assert torch.equal(torch.cat([p.c_word[0] for p in parts]), whole.c_word[0])
        assert torch.equal(torch.cat([p.c_word[1] for p in parts]), whole.c_word[1])
        assert torch.equal(torch.cat([p.s_idx for p in parts]), whole.s_idx)
        assert [q for p in parts for q in p.id] == whole.id


def test_a_record_with_an_unset_attribute_splits_and_empties() -> None:
    """5 samples in batches of 4 at world 3: the last batch (one sample) leaves
    ranks 1 and 2 an empty share, built from the record with its ``None``
    attribute kept (it raised "cannot build an empty batch of type NoneType")."""
    original, per_rank, warned = _shard(TargetlessBatch, 3, n=5)
    assert not warned
    last = [per_rank[r][-1] for r in range(3)]
    assert [len(p.id) for p in last] == [1, 0, 0]
    assert all(type(p) is TargetlessBatch and p.target is None for p in last)
    assert all(p.c_word[0].shape[0] == len(p.id) for p in last)
    assert torch.equal(last[0].c_word[0], original[-1].c_word[0])


def test_a_record_with_a_whole_batch_value_padded_otherwise_stops_the_run() -> None:
    """A count over the whole batch is no sample's: the record cannot be split,
    and the share collated alone is padded to its own longest: the loader raises
    instead of training on other padding."""
    with pytest.raises(ShardingError, match=r"CountedBatch.*dimension 1"):
        _shard(CountedBatch, 2)


def test_record_fields_reads_plain_objects_only() -> None:
    batch = Batch([("q0", torch.ones(2))])
    assert set(record_fields(batch) or {}) == {"c_word", "s_idx", "id"}
    assert record_fields(torch.ones(2)) is None
    assert record_fields({"a": 1}) is None
    assert record_fields([1, 2]) is None
    assert record_fields(len) is None  # a function
    assert record_fields(Batch) is None  # a class
    assert record_fields(torch) is None  # a module
