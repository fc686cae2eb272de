"""Lazy epochs of a sharded loader (``runtime.data``): an epoch of more than
``EAGER_LIMIT`` batches is not drawn up front.

minGPT-style trainers (``RandomSampler(ds, replacement=True,
num_samples=int(1e10))``, left with ``break`` after ``max_iters``) have epochs
that cannot be listed. Their batches are drawn one at a time, as the original
draws them: the first under rank 0's RNG state (where a sampler draws its seed),
the later ones under a copy of the state that draw left, kept apart from the
training's RNG and the same on every rank. Agreement is checked at the first step
(on disagreement rank 0's batches are broadcast, each step) and again at steps
2, 4, 8, ... (a late disagreement fails on every rank). ``replay`` records where
the epoch started (RNG state, the sampler's generator), and a resumed epoch is
drawn again up to its step.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .data import _EpochBatches


_KEPT_SHARES = 4096


class _LazyPlan:
    """``plan`` of a lazy epoch: only the shares of steps drawn and not yet read."""

    def __init__(self, inner: Any) -> None:
        self.shares: dict[int, tuple[int, int]] = {}
        try:
            self.length = len(inner)
        except TypeError:
            self.length = 1 << 62

    def __getitem__(self, step: int) -> tuple[int, int]:
        for old in [s for s in self.shares if s < step]:
            del self.shares[old]  # a loader with workers reads a few steps behind
        return self.shares[step]

    def __len__(self) -> int:
        return self.length


def _generator_of(inner: Any) -> torch.Generator | None:
    for candidate in (inner, getattr(inner, "sampler", None)):
        generator = getattr(candidate, "generator", None)
        if isinstance(generator, torch.Generator):
            return generator
    return None


def _lazy_global_batches(
    owner: _EpochBatches, plan: _LazyPlan
) -> Iterator[tuple[int, list[Any]]]:
    """(step, global batch) of a lazy epoch from its start, the same on every rank;
    a resumed epoch is drawn again and its steps before the resume are skipped."""
    from .data import ShardingError, _digest  # (data imports this module)

    comm, rank = owner.runtime.comm, owner.runtime.env.rank
    replayed, skip = owner._replayed, owner.resume_step
    owner._replayed, owner.resume_step = None, 0
    generator = _generator_of(owner.inner)
    if replayed is None:
        start = comm.broadcast_object(torch.get_rng_state() if rank == 0 else None)
        replay = {
            "rng": start,
            "generator": None if generator is None else generator.get_state(),
        }
    else:
        replay, start = replayed, replayed["rng"]
        if generator is not None and replay["generator"] is not None:
            generator.set_state(replay["generator"])
    owner.replay = replay
    own = torch.get_rng_state()
    torch.set_rng_state(start)
    try:
        iterator = iter(owner.inner)
        first = next(iterator, None)
    finally:
        drawn = torch.get_rng_state()
        if replayed is not None:  # a resumed rank has its own saved state back
            torch.set_rng_state(own)
    if first is None:
        return
    broadcast = len(set(comm.all_gather_object(_digest([list(first)])))) > 1
    digest, check_at, step, batch = 0, 1, 0, list(first)
    while True:
        if broadcast:
            batch = comm.broadcast_object(batch if rank == 0 else None)
        else:
            digest = hash((digest, tuple(batch)))
            if step == check_at:
                check_at *= 2
                if len(set(comm.all_gather_object(digest))) > 1:
                    raise ShardingError(
                        f"the sampler gave different batches on different ranks by "
                        f"step {step} of an epoch of {len(plan)} batches (it draws "
                        f"from a random generator of its own, not torch's): seed it "
                        f"the same on every rank"
                    )
        if step >= skip:
            yield step, batch
        own = torch.get_rng_state()
        torch.set_rng_state(drawn)
        try:
            following = next(iterator, None)
        finally:
            drawn = torch.get_rng_state()
            torch.set_rng_state(own)
        if following is None:
            return
        step, batch = step + 1, list(following)
