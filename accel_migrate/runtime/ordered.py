"""Outputs collected over a sharded loader, put back in the original script's order.

An eval loop that collects predictions (``results += preds.tolist()``,
``all_preds.append(p.cpu())``) over a sharded loader holds this rank's share only.
``gather_in_order(values, loader)`` gives every rank what the original script
collected: the same entries, in the same order, once each.

How the shares are laid out (``runtime.data``):

- global batch mode: step ``s`` of an epoch is the original's global batch ``s``,
  and rank ``r`` holds its contiguous slice ``chunk_bounds(total_s, world, r)``
  (an empty slice for a short batch). Nothing is padded, so putting the slices of
  every step back side by side, rank 0 first, is the original's order exactly, for
  ``shuffle=False`` and ``shuffle=True`` alike (every rank draws the original's
  batches);
- per-device mode: the epoch's samples, in the original's order, are dealt out
  round-robin after repeating the first ``world - 1`` at most, so sample ``i`` of
  rank ``r`` is the original's sample ``i * world + r``; the repeats fall at the end
  and are cut. With ``drop_last=True`` samples are missing and nothing can be put
  back: that is an error.

The collected values must match the rank's shares, which is checked: a flat
per-sample list (or a tensor whose rows are samples) of the pass's sample count, or
(``per_batch=True``) one entry per step whose length is that step's share. Anything
else raises ``GatherOrderError`` on every rank, never a wrong order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ._state import get_runtime
from .data import GlobalBatchSlices, PerDeviceBatches, _LazyPlan, chunk_bounds


class GatherOrderError(RuntimeError):
    """Collected values that do not match the loader's shares."""


def gather_in_order(values: Any, loader: Any, per_batch: bool = False) -> Any:
    """Every rank's ``values`` collected over ``loader``, in the original's order.

    ``values``: a list with one entry per sample (``results += preds.tolist()``), a
    tensor whose rows are samples, or with ``per_batch=True`` a list with one entry
    per batch (tensors, numpy arrays or lists: ``all_preds.append(p.cpu())``), which
    comes back with one entry per original batch. Call it on every rank, after the
    loop over ``loader`` (it is a collective).
    """
    runtime = get_runtime()
    env = runtime.env
    if not env.distributed or not getattr(loader, "_accel_sharded", False):
        return values  # every rank iterated the whole loader: nothing to put back
    batches = loader.batch_sampler
    steps = range(loader._accel_first_step, loader._accel_step)
    if isinstance(batches.plan, _LazyPlan):
        raise GatherOrderError(
            "gather_in_order: the loader's epoch is drawn lazily (more than "
            "runtime.data.EAGER_LIMIT batches); its shares are not kept"
        )
    tensor = isinstance(values, torch.Tensor)
    if not tensor and not isinstance(values, list):
        raise GatherOrderError(
            f"gather_in_order takes a list or a tensor, got {type(values).__name__}"
        )
    local = [batches.plan[s][0] for s in steps]
    problem = _mismatch(values, local, per_batch)
    # Every rank learns every rank's verdict, so that all of them fail together.
    gathered = runtime.comm.all_gather_object(
        (problem, _portable(values, per_batch) if problem is None else None)
    )
    for rank, (wrong, _) in enumerate(gathered):
        if wrong is not None:
            raise GatherOrderError(f"gather_in_order: on rank {rank}, {wrong}")
    parts = [part for _, part in gathered]
    if isinstance(batches, PerDeviceBatches):
        samples = _per_device_order(parts, batches, per_batch, env.world_size)
    else:
        assert isinstance(batches, GlobalBatchSlices)
        samples = _global_order(parts, batches, steps, per_batch, env.world_size)
    return _restored(samples, values, per_batch)


def _mismatch(values: Any, local: list[int], per_batch: bool) -> str | None:
    if not per_batch:
        count = _length(values)
        if count != sum(local):
            return (
                f"{count} values were collected over {len(local)} batches that held "
                f"{sum(local)} samples on this rank (one value per sample is needed)"
            )
        return None
    if len(values) != len(local):
        return f"{len(values)} entries were collected over {len(local)} batches (one per batch is needed)"
    for step, (entry, share) in enumerate(zip(values, local, strict=True)):
        if _length(entry) != share:
            return (
                f"entry {step} holds {_length(entry)} values for a batch of {share} "
                f"samples on this rank (one value per sample is needed)"
            )
    return None


def _length(value: Any) -> int | None:
    if isinstance(value, torch.Tensor):
        return value.shape[0] if value.dim() else None
    shape = getattr(value, "shape", None)  # numpy
    if isinstance(shape, tuple):
        return shape[0] if shape else None
    if isinstance(value, (list, tuple)):
        return len(value)
    return None


def _portable(values: Any, per_batch: bool) -> Any:
    """What is sent: tensors on the CPU (objects travel through pickling)."""

    def cpu(value: Any) -> Any:
        return value.detach().cpu() if isinstance(value, torch.Tensor) else value

    return [cpu(v) for v in values] if per_batch else cpu(values)


def _split(flat: Any, sizes: Sequence[int]) -> list[Any]:
    pieces, start = [], 0
    for size in sizes:
        pieces.append(flat[start : start + size])
        start += size
    return pieces


def _global_order(
    parts: list[Any],
    batches: GlobalBatchSlices,
    steps: range,
    per_batch: bool,
    world: int,
) -> list[list[Any]]:
    """Per original batch, the rank pieces side by side (rank 0 first)."""
    totals = [batches.plan[s][1] for s in steps]
    per_rank: list[list[Any]] = []
    for rank, part in enumerate(parts):
        if per_batch:
            per_rank.append(list(part))
        else:
            shares = [
                chunk_bounds(t, world, rank)[1] - chunk_bounds(t, world, rank)[0]
                for t in totals
            ]
            per_rank.append(_split(part, shares))
    return [[per_rank[r][i] for r in range(world)] for i in range(len(totals))]


def _per_device_order(
    parts: list[Any], batches: PerDeviceBatches, per_batch: bool, world: int
) -> list[list[Any]]:
    if batches.drop_last:
        raise GatherOrderError(
            "gather_in_order: batch mode 'per-device' with drop_last=True leaves "
            "samples out, so the original's outputs cannot be put back together; "
            "use the default batch mode 'global'"
        )
    flats = [_joined(list(p)) if per_batch else p for p in parts]
    total = sum(batches.global_sizes)
    # Sample i of rank r is the original's sample i * world + r; the repeats that
    # even the ranks out are the last ones and are cut.
    order = [flats[i % world][i // world] for i in range(total)]
    joined = _stacked(order, flats[0])
    return [[piece] for piece in _split(joined, batches.global_sizes)]


def _stacked(samples: list[Any], like: Any) -> Any:
    if isinstance(like, torch.Tensor):
        return torch.stack(samples) if samples else like[:0]
    if hasattr(like, "shape") and not isinstance(like, list):
        import numpy

        return numpy.stack(samples) if samples else like[:0]
    return samples


def _joined(pieces: list[Any]) -> Any:
    first = pieces[0]
    if isinstance(first, torch.Tensor):
        if len(pieces) == 1:
            return first
        return torch.cat(pieces)
    if hasattr(first, "shape") and not isinstance(first, (list, tuple)):
        import numpy

        return numpy.concatenate(pieces)
    if isinstance(first, (list, tuple)):
        return type(first)(x for piece in pieces for x in piece)
    raise GatherOrderError(
        f"gather_in_order cannot join entries of type {type(first).__name__}"
    )


def _restored(samples: list[list[Any]], values: Any, per_batch: bool) -> Any:
    """The original's collection from its per-batch pieces, on the values' device."""
    device = None
    if isinstance(values, torch.Tensor):
        device = values.device
    elif per_batch and values and isinstance(values[0], torch.Tensor):
        device = values[0].device
    batches = [_joined(pieces) for pieces in samples]
    if device is not None:
        batches = [b.to(device) if isinstance(b, torch.Tensor) else b for b in batches]
    if per_batch:
        return batches
    if isinstance(values, torch.Tensor):
        return torch.cat(batches) if batches else values
    return [x for batch in batches for x in batch]
