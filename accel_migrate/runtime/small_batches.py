"""A loader whose every global batch is smaller than the world: refused at its first batch.

A short last batch (fewer samples than processes) leaves some processes an
empty share once an epoch, and the runtime carries it: an empty batch of the
same structure, weighed zero (``data.empty_like_batch``, ``empty_share``).
A loader configured with fewer samples a batch than there are processes
(``DataLoader(ds)``, whose default batch size is 1, at two processes) leaves
a process with nothing at every step. Its forward then runs on zero rows at
every step, where the original never did: ``net(x).argmax()`` with no
dimension fails on the empty tensor, far from the cause, and an evaluation
runs on one process only. So its first such batch stops every process (each
draws the same plan, so all stop at the same step and none waits) with an
error that names the loader's batch size, the world size and the fixes.
"""

from __future__ import annotations

from typing import Any

from .data import ShardingError


class BatchSmallerThanWorldError(ShardingError):
    """A sharded loader whose batch size is below the number of processes."""


def check_batch_covers_world(batches: Any, step: int, total: int, world: int) -> None:
    """Raise when the loader behind ``batches`` (its ``GlobalBatchSlices``) is
    configured with fewer samples a batch than the ``world``; ``total`` is the
    global batch of ``step``, already known to be smaller than the world."""
    size = getattr(batches.inner, "batch_size", None)
    if not isinstance(size, int):
        # A batch sampler of its own: refused when every batch of the epoch
        # leaves a process empty (a short last batch alone is carried).
        plan = batches.plan
        if not isinstance(plan, list) or len(plan) < 2:
            # an epoch of one batch: its shortness is a short last batch's
            return
        if any(t >= world for _, t in plan):
            return
        size = max((t for _, t in plan), default=total)
    if size >= world:
        return
    raise BatchSmallerThanWorldError(
        f"accel.prepare_dataloader: this DataLoader's batch size is {size}, smaller "
        f"than the {world} processes: its global batch of {total} sample(s) at step "
        f"{step} is split into one share a process, and {world - total} of them get "
        f"no sample at all, at every step (a forward of zero rows, which the "
        f"original never ran, such as net(x).argmax() with no dimension, fails "
        f"there). Fix: give the loader a batch size of at least {world} (the global "
        f"batch then changes), or do not prepare it (every process then reads all "
        f"of it, in the same order: right for an evaluation loader, whose sums are "
        f"then not combined with accel.reduce), or run with batch mode 'per-device' "
        f"(`accel-migrate launch --batch-mode per-device`, or "
        f"ACCEL_MIGRATE_BATCH_MODE=per-device): each process then takes whole "
        f"batches of {size}, a global batch of {size * world}, so the losses differ "
        f"from the original's"
    )
