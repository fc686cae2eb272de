"""Data sharding that keeps the original script's batches.

Global mode (the default): every rank draws the same sequence of global batches as
the original script would have, and takes its contiguous slice of each. The number
of steps per epoch and the samples of every step are those of the original; slices
are disjoint and cover every batch. A rank whose slice of a short batch is empty
gets an empty batch (same structure, zero rows) and a loss weight of zero, so no
sample is ever duplicated or dropped.

Per-device mode: the epoch's sample order is dealt out round-robin and every rank
makes whole batches of the original size (the global batch grows with the world).
Like ``DistributedSampler``, up to ``world_size - 1`` samples are repeated so that
every rank takes the same number of steps.

Why the RNG dance: a shuffling sampler draws its permutation from the global torch
RNG when an epoch starts. Ranks' RNG states drift apart (dropout, uneven work), so
every rank replays rank 0's RNG state to draw the order, and rank 0 keeps the state
the original script would have had. A digest check catches samplers that use
another RNG; then rank 0's batches are broadcast.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, IterableDataset, Sampler

if TYPE_CHECKING:
    from ._state import Runtime


class ShardingError(RuntimeError):
    """A data loader whose batches cannot be split across ranks safely."""


def chunk_bounds(size: int, world_size: int, rank: int) -> tuple[int, int]:
    """The [lo, hi) slice of a batch of ``size`` that ``rank`` takes (first ranks take more)."""
    base, extra = divmod(size, world_size)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


class _EpochBatches(Sampler[list[int]]):
    """Base: draws the epoch's global batches identically on every rank."""

    def __init__(self, inner: Iterable[Sequence[int]], runtime: Runtime) -> None:
        self.inner = inner
        self.runtime = runtime
        #: Per step of the epoch being iterated: (this rank's samples, global samples).
        self.plan: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]

    def _global_batches(self) -> list[list[Any]]:
        comm, rank = self.runtime.comm, self.runtime.env.rank
        shared_state = comm.broadcast_object(
            torch.get_rng_state() if rank == 0 else None
        )
        own_state = torch.get_rng_state()
        torch.set_rng_state(shared_state)
        try:
            batches = [list(batch) for batch in self.inner]
        finally:
            if rank != 0:
                torch.set_rng_state(own_state)
        digests = comm.all_gather_object(_digest(batches))
        if len(set(digests)) > 1:
            batches = comm.broadcast_object(batches if rank == 0 else None)
        return batches


class GlobalBatchSlices(_EpochBatches):
    """Each rank yields its slice of every global batch."""

    def __iter__(self) -> Iterator[list[Any]]:
        world, rank = self.runtime.env.world_size, self.runtime.env.rank
        batches = self._global_batches()
        plan = []
        for batch in batches:
            lo, hi = chunk_bounds(len(batch), world, rank)
            plan.append((hi - lo, len(batch)))
        self.plan = plan
        for batch, (local, _total) in zip(batches, plan, strict=True):
            lo, _hi = chunk_bounds(len(batch), world, rank)
            # An empty share still loads one sample so that collation yields the
            # batch's structure; the loader empties it before the script sees it.
            yield batch[lo : lo + local] if local else batch[:1]


class PerDeviceBatches(_EpochBatches):
    """Each rank yields whole batches of the original size from its share of samples."""

    def __init__(self, inner: Any, runtime: Runtime) -> None:
        super().__init__(inner, runtime)
        self.batch_size: int | None = getattr(inner, "batch_size", None)
        self.drop_last: bool = bool(getattr(inner, "drop_last", False))

    def _local_order(self) -> list[Any]:
        world, rank = self.runtime.env.world_size, self.runtime.env.rank
        batches = self._global_batches()
        if self.batch_size is None:
            self.batch_size = max((len(b) for b in batches), default=1)
        order = [index for batch in batches for index in batch]
        per_rank = -(-len(order) // world)
        order += order[: per_rank * world - len(order)]
        return order[rank::world]

    def __len__(self) -> int:
        batch = self.batch_size or 1
        sampler = getattr(self.inner, "sampler", None)
        samples = len(sampler) if sampler is not None else len(self.inner) * batch  # type: ignore[arg-type]
        per_rank = -(-samples // self.runtime.env.world_size)
        return per_rank // batch if self.drop_last else -(-per_rank // batch)

    def __iter__(self) -> Iterator[list[Any]]:
        order = self._local_order()
        size = self.batch_size or 1
        batches = [order[i : i + size] for i in range(0, len(order), size)]
        if self.drop_last and batches and len(batches[-1]) < size:
            batches.pop()
        self.plan = [(len(b), len(b) * self.runtime.env.world_size) for b in batches]
        yield from batches


def _digest(batches: list[list[Any]]) -> int:
    # Integer hashing is the same in every process; other index types make the
    # digests differ and fall back to broadcasting, which is always correct.
    return hash(tuple(tuple(batch) for batch in batches))


def empty_like_batch(batch: Any) -> Any:
    """The same batch structure with zero samples."""
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, Mapping):
        return type(batch)({key: empty_like_batch(value) for key, value in batch.items()})  # type: ignore[call-arg]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(empty_like_batch(value) for value in batch))
    if isinstance(batch, (list, tuple)):
        if all(isinstance(item, (str, bytes, int, float, bool)) for item in batch):
            return type(batch)()  # one entry per sample
        return type(batch)(empty_like_batch(value) for value in batch)
    raise ShardingError(
        f"a rank got no samples of a short global batch and cannot build an empty "
        f"batch of type {type(batch).__name__}; use a batch size that is a multiple "
        f"of the world size, drop_last=True, or batch mode 'per-device'"
    )


class ShardedDataLoader(DataLoader):
    """A DataLoader over one rank's share; records each step's loss weight."""

    _accel_runtime: Runtime

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        batches: _EpochBatches = self.batch_sampler  # type: ignore[assignment]
        runtime = self._accel_runtime
        for step, batch in enumerate(super().__iter__()):
            local, total = batches.plan[step]
            runtime.set_batch_share(local, total)
            yield empty_like_batch(batch) if local == 0 else batch


_PASSED_THROUGH = (
    "num_workers",
    "collate_fn",
    "pin_memory",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
    "persistent_workers",
    "pin_memory_device",
    "in_order",
)


def shard_loader(loader: DataLoader, runtime: Runtime) -> DataLoader:
    if isinstance(loader, ShardedDataLoader):
        return loader
    if not isinstance(loader, DataLoader):
        raise TypeError(
            f"prepare_dataloader expects a torch.utils.data.DataLoader, got {type(loader).__name__}"
        )
    if isinstance(loader.dataset, IterableDataset) or loader.batch_sampler is None:
        raise ShardingError(
            "cannot shard a DataLoader over an IterableDataset or with batch_size=None: "
            "its samples have no index to split by; give the dataset __getitem__/__len__, "
            "or shard it yourself with accel.rank() and accel.world_size()"
        )
    accepted = inspect.signature(DataLoader.__init__).parameters
    kwargs = {
        name: getattr(loader, name) for name in _PASSED_THROUGH if name in accepted
    }
    if loader.num_workers > 0:
        kwargs["prefetch_factor"] = loader.prefetch_factor
    batches_cls = (
        PerDeviceBatches
        if runtime.config.batch_mode == "per-device"
        else GlobalBatchSlices
    )
    sharded = ShardedDataLoader(
        loader.dataset,
        batch_sampler=batches_cls(loader.batch_sampler, runtime),
        **kwargs,
    )
    sharded._accel_runtime = runtime
    return sharded
