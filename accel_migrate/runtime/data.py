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
RNG when an epoch starts. Ranks' RNG states can drift apart (dropout on slices of
different sizes), so every rank replays rank 0's RNG state to draw the order, and
every rank keeps the state that draw left, the one the original script would have
had: ranks whose draws are the original's (``accel.batch_draw``) stay in step with
it. A digest check catches samplers that use another RNG; then rank 0's batches are
broadcast.

Lazy epochs (``runtime.lazy_epochs``): an epoch of more than ``EAGER_LIMIT`` batches
(minGPT-style trainers: ``RandomSampler(ds, replacement=True,
num_samples=int(1e10))``, left with ``break`` after ``max_iters``) is not drawn up
front. Its batches are drawn one at a time, as the original draws them: the first
under rank 0's RNG state (where a sampler draws its seed), the later ones under a
copy of the state that draw left, kept apart from the training's RNG and the same on
every rank. Agreement is checked at the first step (on disagreement rank 0's batches
are broadcast, each step) and again at steps 2, 4, 8, ... (a late disagreement fails
on every rank). A checkpoint records where the epoch started (RNG state, the
sampler's generator) and the step, and resuming draws the epoch again up to that
step.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.data import DataLoader, IterableDataset, Sampler

from .lazy_epochs import _KEPT_SHARES, _lazy_global_batches, _LazyPlan

if TYPE_CHECKING:
    from ._state import Runtime


#: Epochs of more batches than this are drawn lazily (see the module docstring).
EAGER_LIMIT = 65536


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
        #: The epoch's batches as drawn (for checkpoints), and a resumed epoch's.
        self.current: list[list[Any]] = []
        self._resumed: list[list[Any]] | None = None
        self.resume_step = 0
        #: A lazy epoch: where it started (for checkpoints), and a resumed one's.
        self.replay: dict[str, Any] | None = None
        self._replayed: dict[str, Any] | None = None
        #: Epochs drawn so far: with the loader's length, what every rank must agree on.
        self._drawn = 0
        #: Yield whole global batches: the loader's collate_fn keeps this rank's
        #: rows (``runtime.collation``).
        self.whole = False

    def resume(self, batches: list[list[Any]], step: int) -> None:
        """Iterate ``batches`` from ``step`` next time, instead of drawing an epoch."""
        self._resumed, self.resume_step = batches, step

    def resume_lazily(self, replay: dict[str, Any], step: int) -> None:
        """Draw the lazy epoch that started at ``replay`` again, and go on at ``step``."""
        self._replayed, self.resume_step = replay, step

    def _is_lazy(self) -> bool:
        if self._resumed is not None:
            return False
        if self._replayed is not None:
            return True
        try:
            return len(self.inner) > EAGER_LIMIT  # type: ignore[arg-type]
        except TypeError:
            return True  # no length: possibly endless

    def _epoch(self) -> tuple[list[list[Any]], int]:
        """This epoch's batches and the step to start at; resets a pending resume."""
        if self._resumed is not None:
            batches, step = self._resumed, self.resume_step
            self._resumed, self.resume_step = None, 0
        else:
            batches, step = self._draw(), 0
        self.current = batches
        return batches, step

    def _draw(self) -> list[list[Any]]:
        """This rank's batches for a new epoch."""
        return self._global_batches()

    def __len__(self) -> int:
        return len(self.inner)  # type: ignore[arg-type]

    def _global_batches(self) -> list[list[Any]]:
        comm, rank = self.runtime.comm, self.runtime.env.rank
        shared_state = comm.broadcast_object(
            torch.get_rng_state() if rank == 0 else None
        )
        torch.set_rng_state(shared_state)
        # Every rank keeps the state the draw left, rank 0's: the ranks' torch RNG
        # then goes on in step with the original's, which `accel.batch_draw` needs.
        batches = [list(batch) for batch in self.inner]
        self._drawn += 1
        tag = (self._drawn, _length(self.inner))
        gathered = comm.all_gather_object((tag, _digest(batches)))
        _check_same_epoch([t for t, _ in gathered])
        digests = [d for _, d in gathered]
        if len(set(digests)) > 1:
            batches = comm.broadcast_object(batches if rank == 0 else None)
        return batches


class GlobalBatchSlices(_EpochBatches):
    """Each rank yields its slice of every global batch."""

    def __iter__(self) -> Iterator[list[Any]]:
        if self._is_lazy():
            yield from self._lazy_slices()
            return
        world, rank = self.runtime.env.world_size, self.runtime.env.rank
        batches, first = self._epoch()
        plan = []
        for batch in batches:
            lo, hi = chunk_bounds(len(batch), world, rank)
            plan.append((hi - lo, len(batch)))
        self.plan = plan
        for batch, (local, _total) in list(zip(batches, plan, strict=True))[first:]:
            lo, _hi = chunk_bounds(len(batch), world, rank)
            if self.whole:  # the loader's collate_fn takes this rank's rows
                yield batch
            else:
                # An empty share still loads one sample so that collation yields
                # the batch's structure; the loader empties it before the script
                # sees it.
                yield batch[lo : lo + local] if local else batch[:1]

    def _lazy_slices(self) -> Iterator[list[Any]]:
        world, rank = self.runtime.env.world_size, self.runtime.env.rank
        plan = _LazyPlan(self.inner)
        self.plan, self.current = plan, []  # type: ignore[assignment]
        for step, batch in _lazy_global_batches(self, plan):
            lo, hi = chunk_bounds(len(batch), world, rank)
            plan.shares[step] = (hi - lo, len(batch))
            plan.shares.pop(step - _KEPT_SHARES, None)  # read by now, or never
            yield batch if self.whole else batch[lo:hi] if hi > lo else batch[:1]


class PerDeviceBatches(_EpochBatches):
    """Each rank yields whole batches of the original size from its share of samples."""

    def __init__(self, inner: Any, runtime: Runtime) -> None:
        super().__init__(inner, runtime)
        self.batch_size: int | None = getattr(inner, "batch_size", None)
        self.drop_last: bool = bool(getattr(inner, "drop_last", False))
        #: Sizes of the epoch's global batches as the original drew them.
        self.global_sizes: list[int] = []

    def _draw(self) -> list[list[Any]]:
        world, rank = self.runtime.env.world_size, self.runtime.env.rank
        if self._is_lazy():
            raise ShardingError(
                f"batch mode 'per-device' deals out a whole epoch's samples, and this "
                f"epoch has {len(self.inner)} batches: use the default batch mode "  # type: ignore[arg-type]
                f"'global', which draws the batches one at a time"
            )
        batches = self._global_batches()
        size = self.batch_size or max((len(b) for b in batches), default=1)
        order = [index for batch in batches for index in batch]
        # The original's batch sizes, for putting collected outputs back in order.
        self.global_sizes = [len(batch) for batch in batches]
        per_rank = -(-len(order) // world)
        order += order[: per_rank * world - len(order)]
        mine = order[rank::world]
        local = [mine[i : i + size] for i in range(0, len(mine), size)]
        if self.drop_last and local and len(local[-1]) < size:
            local.pop()
        return local

    def __len__(self) -> int:
        batch = self.batch_size or 1
        sampler = getattr(self.inner, "sampler", None)
        samples = len(sampler) if sampler is not None else len(self.inner) * batch  # type: ignore[arg-type]
        per_rank = -(-samples // self.runtime.env.world_size)
        return per_rank // batch if self.drop_last else -(-per_rank // batch)

    def __iter__(self) -> Iterator[list[Any]]:
        batches, first = self._epoch()
        self.plan = [(len(b), len(b) * self.runtime.env.world_size) for b in batches]
        yield from batches[first:]


def _length(inner: Any) -> int | None:
    try:
        return len(inner)
    except TypeError:
        return None


def _check_same_epoch(tags: list[tuple[int, int | None]]) -> None:
    """Every rank starts the same epoch of the same loader, or none goes on: ranks
    that took different paths would pair one loader's collectives with another's
    and train on wrong samples."""
    if len(set(tags)) <= 1:
        return
    where = "; ".join(
        f"rank {rank}: epoch {epoch} of a loader of {length} batches"
        for rank, (epoch, length) in enumerate(tags)
    )
    raise ShardingError(
        f"the ranks are starting different epochs of their data loaders ({where}): "
        f"they took different paths through the script, usually a decision made on "
        f"a value of this process's share of the data (early stopping, a break or an "
        f"is_best on a validation metric it computed alone); make that value global "
        f"with accel.reduce or accel.global_loss before deciding"
    )


def _digest(batches: list[list[Any]]) -> int:
    # Integer hashing is the same in every process; other index types make the
    # digests differ and fall back to broadcasting, which is always correct.
    return hash(tuple(tuple(batch) for batch in batches))


def empty_like_batch(batch: Any) -> Any:
    """The same batch structure with zero samples."""
    if batch is None:
        return None  # an attribute a record batch leaves unset (a split keeps it)
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
    from .collation import record_fields  # (collation imports this module)

    fields = record_fields(batch)
    if fields:
        # a torchtext-style Batch object: each attribute emptied
        empty = copy.copy(batch)
        emptied = {}
        for name, value in fields.items():
            try:
                emptied[name] = empty_like_batch(value)
            except ShardingError:
                raise ShardingError(
                    f"a rank got no samples of a short global batch and cannot "
                    f"build an empty {type(batch).__name__}: its attribute "
                    f"`{name}` is a {type(value).__name__}; use a batch size that "
                    f"is a multiple of the world size, drop_last=True, or batch "
                    f"mode 'per-device'"
                ) from None
        vars(empty).update(emptied)
        return empty
    raise ShardingError(
        f"a rank got no samples of a short global batch and cannot build an empty "
        f"batch of type {type(batch).__name__}; use a batch size that is a multiple "
        f"of the world size, drop_last=True, or batch mode 'per-device'"
    )


def _sharded_iter(self: Any) -> Iterator[Any]:
    # Not a generator: the loader's own iterator is made at ``iter(loader)``, as
    # the original's is, since making it draws the worker seed from the torch
    # RNG. With two iterators open at once (``zip(source_loader,
    # target_loader)``) the draws then come in the original's order: both
    # worker seeds, then each sampler's order at its first batch.
    batches: _EpochBatches = self.batch_sampler
    first_step = batches.resume_step
    self._accel_epochs_started += 1
    self._accel_step = first_step
    self._accel_first_step = first_step  # where this pass started (ordered gathers)
    loader_iter = super(type(self), self).__iter__  # the loader class's own iteration
    if first_step:
        # A resumed epoch: the original drew its worker seed when the epoch began,
        # before the checkpoint; drawing again would shift the RNG.
        state = torch.get_rng_state()
        iterator = loader_iter()
        torch.set_rng_state(state)
    else:
        iterator = loader_iter()
    return _sharded_steps(self, batches, iterator, first_step)


def _sharded_steps(
    self: Any, batches: _EpochBatches, iterator: Iterator[Any], first_step: int
) -> Iterator[Any]:
    runtime = self._accel_runtime
    source = id(iterator)  # this pass (the loader may have two open at once)
    world = runtime.env.world_size
    try:
        for step, batch in enumerate(iterator, start=first_step):
            local, total = batches.plan[step]
            if total < world and isinstance(batches, GlobalBatchSlices):
                from .small_batches import check_batch_covers_world

                check_batch_covers_world(batches, step, total, world)
            runtime.set_batch_share(local, total, source)
            if runtime.drift_check is not None:  # the first steps only (drift.py)
                runtime.drift_check.at_batch(runtime)
            self._accel_step = step + 1
            yield empty_like_batch(batch) if local == 0 else batch
    finally:
        runtime.end_batch_shares(source)


def _position(self: Any) -> dict[str, Any]:
    """Where the data stands: the epoch to run and the step to start it at."""
    batches: _EpochBatches = self.batch_sampler
    started, step = self._accel_epochs_started, self._accel_step
    if started and 0 < step < len(batches.plan):
        if isinstance(batches.plan, _LazyPlan):
            return {
                "epoch": started - 1,
                "step": step,
                "batches": None,
                "replay": batches.replay,
            }
        return {"epoch": started - 1, "step": step, "batches": batches.current}
    return {"epoch": started, "step": 0, "batches": None}


def _resume(self: Any, position: dict[str, Any]) -> None:
    self._accel_epochs_started = int(position["epoch"])
    if position.get("replay") is not None:
        self.batch_sampler.resume_lazily(position["replay"], int(position["step"]))
    elif position["batches"] is not None:
        self.batch_sampler.resume(position["batches"], int(position["step"]))


_SHARDED_CLASSES: dict[type, type] = {}


def _sharded_class(cls: type) -> type:
    """A direct subclass of the loader's class that iterates the rank's share.

    The loader object stays the one the script built: a DataLoader subclass keeps
    its own behaviour, and references held elsewhere see the sharded loader.
    Iterating records each step's share of the global batch, and where the epoch
    stands, for ``accel.save_state``.
    """
    if cls not in _SHARDED_CLASSES:
        _SHARDED_CLASSES[cls] = type(
            f"Sharded{cls.__name__}",
            (cls,),
            {
                "__module__": cls.__module__,
                "__iter__": _sharded_iter,
                "accel_position": _position,
                "accel_resume": _resume,
                "_accel_sharded": True,
                "_accel_epochs_started": 0,
                "_accel_step": 0,
                "_accel_first_step": 0,
            },
        )
    return _SHARDED_CLASSES[cls]


def shard_loader(loader: DataLoader, runtime: Runtime) -> DataLoader:
    if getattr(loader, "_accel_sharded", False):
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
    batches_cls = (
        PerDeviceBatches
        if runtime.config.batch_mode == "per-device"
        else GlobalBatchSlices
    )
    batches = batches_cls(loader.batch_sampler, runtime)
    if batches_cls is GlobalBatchSlices and runtime.env.world_size > 1:
        from .collation import GlobalCollate, needs_global

        if needs_global(loader.collate_fn):
            # The script's own collation (padding to a batch's longest) of the
            # global batch, then this rank's rows: the original's tensors.
            loader.collate_fn = GlobalCollate(
                loader.collate_fn, runtime.env.world_size, runtime.env.rank
            )
            batches.whole = True
    # DataLoader refuses a new batch_sampler after __init__; set it past the guard.
    object.__setattr__(loader, "batch_sampler", batches)
    loader.__class__ = _sharded_class(type(loader))
    loader._accel_runtime = runtime  # type: ignore[attr-defined]
    return loader
