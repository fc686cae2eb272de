"""Which part of the global-batch loss one rank's loss stands for.

The original script computed its loss over the whole global batch; each rank
computes the same formula over its share of it. How the shares add up to the
original depends on the loss's reduction:

- ``"mean"`` over samples (every ``torch.nn`` loss by default): the global mean
  is the shares' means weighted by their sample counts, ``local / total``;
- ``"sum"``: the global sum is the sum of the shares' sums, each with weight 1;
- a mean over tokens (``CrossEntropyLoss(ignore_index=pad)``, a masked mean
  ``(l * mask).sum() / mask.sum()``): the global mean is the shares' means
  weighted by their token counts, ``count / sum of all ranks' counts``. The
  script passes its count; the counts are summed across ranks here.

That weight is the rank's *fraction* of the global loss. The gradient exchange
averages over ranks, so ``accel.backward`` multiplies the loss by
``world_size * fraction``, and ``accel.global_loss`` sums ``fraction * loss``.
When no loader is sharded every rank sees the same batch: each one's loss is the
whole loss, with fraction ``1 / world_size``, whatever the reduction.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import torch

if TYPE_CHECKING:
    from ._state import Runtime

Reduction = Literal["mean", "sum"]
REDUCTIONS: tuple[str, ...] = ("mean", "sum")


def check_reduction(reduction: str, count: Any) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduction!r}"
        )
    if count is not None and reduction != "mean":
        raise ValueError(
            "count= is the number of elements a mean is taken over (tokens); a "
            f"loss with reduction={reduction!r} takes no count"
        )


@dataclass(frozen=True)
class LossShare:
    """This rank's fraction of the global loss, and whether its share is empty:
    it holds nothing to average over while the global batch holds something."""

    fraction: float
    empty: bool = False


def loss_share(runtime: Runtime, reduction: str, count: Any = None) -> LossShare:
    """This rank's share of the global loss (see the module docstring).

    With ``count`` a collective: every rank must call it with a count.
    """
    check_reduction(reduction, count)
    env = runtime.env
    if not env.distributed:
        return LossShare(1.0)
    if count is not None:
        local = float(torch.as_tensor(count).detach().to(torch.float64).sum().item())
        total = float(
            runtime.comm.all_reduce(
                torch.tensor(local, dtype=torch.float64), "sum"
            ).item()
        )
        # No rank has anything to average over: every loss is 0/0 and weighs nothing.
        return LossShare(local / total if total else 0.0, local == 0 and total > 0)
    if reduction == "sum":
        return LossShare(1.0 if runtime.batch_share_known() else 1.0 / env.world_size)
    fraction = runtime.batch_fraction()
    return LossShare(fraction, fraction == 0)


def check_one_share(
    shares: Sequence[tuple[int, int]], world: int = 1, rank: int = 0
) -> None:
    """A mean loss weighted by one share (``loss_share``) is the global mean only
    if every sharded loader whose batch it may read gave this process the same
    share of its global batch (FixMatch's labelled and unlabelled loaders, the
    labelled one's last batch short): raises ShardingError where they differ.

    Decided for every process at once where the shares are the plan's
    (``data.chunk_bounds``: the same global batches on every rank), so that all
    raise together: at 4 processes a batch of 6 (2, 2, 1, 1) beside one of 3
    (1, 1, 1, 0) gives ranks 0 and 1 equal fractions, and were they to go on into
    the backward's all-reduce while ranks 2 and 3 raise, they would wait."""
    from .data import ShardingError, chunk_bounds

    def size(total: int, r: int) -> int:
        lo, hi = chunk_bounds(total, world, r)
        return hi - lo

    planned = world > 1 and all(
        size(total, rank) == local for local, total in shares if total
    )
    if planned:
        # every rank's shares follow from the global batches, alike everywhere
        differs = any(
            len({size(total, r) / total for _, total in shares if total}) > 1
            for r in range(world)
        )
    else:
        differs = len({local / total for local, total in shares if total}) > 1
    if not differs:
        return
    held = ", ".join(f"{local} of {total}" for local, total in shares) + " samples"
    if len({local / total for local, total in shares if total}) < 2:
        held += " here, which agree; another process's differ"
    raise ShardingError(
        f"accel.backward(loss) weighs a mean over this process's batch by its "
        f"share of the global batch, but {len(shares)} sharded loaders yielded "
        f"batches since the last backward with different shares ({held}), "
        "and the runtime cannot tell which of them this loss is "
        "computed from: a mean over each loader's batch needs its own weight, "
        "which one backward cannot give. Make each loader's batches split evenly "
        "(drop_last=True, or a batch size that the dataset and the world size "
        "divide), or weigh each term by hand and pass reduction='sum'. A batch "
        "taken only for an evaluation (next() of an iterator left open) counts "
        "too: split its loader evenly as well, or leave that loader unprepared "
        "so that every process evaluates all of it"
    )


def loss_fraction(runtime: Runtime, reduction: str, count: Any = None) -> float:
    """This rank's fraction of the global loss (see the module docstring)."""
    return loss_share(runtime, reduction, count).fraction


@dataclass(frozen=True)
class RecordedLoss:
    """A tensor given to ``accel.backward`` and the fraction it was weighted by.

    ``loss.data`` and ``loss.detach()`` share the tensor's storage: a logged
    ``accel.global_loss(loss.data)`` is recognised as the same loss.
    """

    tensor: weakref.ref[torch.Tensor]
    address: int
    shape: torch.Size
    fraction: float

    @classmethod
    def of(cls, tensor: torch.Tensor, fraction: float) -> RecordedLoss:
        return cls(weakref.ref(tensor), tensor.data_ptr(), tensor.shape, fraction)

    def matches(self, tensor: torch.Tensor) -> bool:
        recorded = self.tensor()
        if recorded is None:
            return False
        if recorded is tensor:
            return True
        return (
            tensor.data_ptr() == self.address
            and tensor.shape == self.shape
            and tensor.dtype == recorded.dtype
            and tensor.device == recorded.device
        )


def as_tensors(loss: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``torch.autograd.backward`` takes one tensor or a sequence of them."""
    if isinstance(loss, torch.Tensor):
        return [loss]
    tensors = list(loss)
    for tensor in tensors:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"accel.backward expects a tensor or a sequence of tensors, got a "
                f"{type(tensor).__name__} in the sequence"
            )
    return tensors


#: The most dimensions of a logged value whose shape a rank with ``None``
#: learns from the others (``sum_shares``); of more, it gets the values flat.
SHAPE_DIMS = 6
#: ``sum_shares``' first all-reduce is a scalar value, then these many facts:
#: ``[has a value, fraction, size, dimensions, each dimension's size..., is the
#: loss last given to accel.backward]``.
HEADER_SIZE = 5 + SHAPE_DIMS
#: Where the facts start in the packet, and where "is the last loss" is.
_FACTS, _LAST = 1, HEADER_SIZE


def sum_shares(
    comm: Any, weighted: torch.Tensor | None, fraction: float, last: bool = False
) -> torch.Tensor | None:
    """The sum of the ranks' weighted losses, where a rank may have none.

    ``accel.global_loss(None)`` on a rank whose share of a short last batch is
    empty (``acc = ... if len(y) else None``) while the others have a value.
    For a mean (the fractions of all the ranks make a whole), one process had a
    value of the whole batch, so the global value is the mean over the ranks
    that have one, their fractions taken anew to a whole; for a sum (each
    rank's fraction is 1), an empty share adds nothing. ``None`` only when no
    rank has one. Each rank sends its value if a scalar, then ``[has a value,
    its fraction, its size, its dimensions and their sizes, ...]`` in one
    all-reduce (``shares_packet``; a rank with ``None`` sends zeros and learns
    the others' shape); a tensor of more than one element then takes a second
    all-reduce of its values (``shares_result``). ``last``: the value is the
    loss last given to ``accel.backward`` (``Runtime.global_loss``).
    """
    packet = shares_packet(comm, weighted, fraction, last=last)
    return shares_result(comm, comm.all_reduce(packet, "sum"), weighted)


def shares_packet(
    comm: Any, weighted: torch.Tensor | None, fraction: float, last: bool = False
) -> torch.Tensor:
    """What one rank sends in ``sum_shares``' all-reduce (started in the backward
    pass for a loss reduced there: ``Runtime.start_loss_reduce``). Built on the
    device, without reading anything back to the host."""
    # the collective's device, and float64 (exact for the fractions and
    # sizes, and one dtype on every rank: a rank with None knows no other)
    device = comm.device if weighted is None else weighted.device
    shape: tuple[int, ...] = () if weighted is None else tuple(weighted.shape)
    scalar = weighted is None or weighted.numel() == 1
    present = 0.0 if weighted is None else 1.0
    size = 0.0 if scalar else float(weighted.numel())  # type: ignore[union-attr]
    known = shape if len(shape) <= SHAPE_DIMS else ()
    dims = [float(len(known)), *map(float, known)]
    dims += [0.0] * (SHAPE_DIMS + 1 - len(dims))
    # (built on the host and copied without waiting: torch.tensor(...,
    # device=cuda) would wait for the queued work first)
    facts = [present, fraction * present, size, *(d * present for d in dims)]
    info = torch.tensor(
        [*facts, float(last)],
        dtype=torch.float64,
    ).to(device, non_blocking=True)
    if weighted is not None and scalar:
        head = weighted.reshape(1).to(info.dtype)
    else:
        head = torch.zeros(1, device=device, dtype=info.dtype)
    return torch.cat([head, info])


def shares_last(sums: torch.Tensor) -> bool:
    """Did a rank send the loss last given to ``accel.backward`` (a host read)?"""
    return bool(sums[_LAST].item())


def shares_result(
    comm: Any, sums: torch.Tensor, weighted: torch.Tensor | None
) -> torch.Tensor | None:
    """``sum_shares``' value from the all-reduced packets. A rank with a value
    knows its shape and size (every rank with a value has the same): it reads
    nothing back to the host (no device sync), the mean over the ranks with a
    value is taken on the device. A rank with ``None`` reads the facts."""
    if weighted is not None:
        if weighted.numel() == 1:
            total = sums[0]
        else:
            total = comm.all_reduce(weighted.reshape(-1).to(torch.float64), "sum")
        count, weights = sums[_FACTS], sums[_FACTS + 1]
        # every rank's share, or sums (each of fraction 1): the sum; else the
        # mean over the ranks with a value, their fractions taken to a whole
        whole = (
            (count > comm.env.world_size - 0.5)
            | (weights == 0)
            | (weights >= count - 1e-6)
        )
        total = torch.where(whole, total, total / weights).to(weighted.dtype)
        return total.reshape(weighted.shape)
    facts = [float(v) for v in sums[_FACTS:].tolist()]
    count, weights = facts[0], facts[1]
    if count == 0:
        return None
    # every rank with a value has the same shape: the sums are `count` times it
    ndim = round(facts[3] / count)
    shape = tuple(round(d / count) for d in facts[4 : 4 + ndim])
    if facts[2]:
        zeros = torch.zeros(round(facts[2] / count), device=sums.device)
        total = comm.all_reduce(zeros.to(torch.float64), "sum")
    else:
        total = sums[0]
    total = total.to(torch.get_default_dtype())
    if math.prod(shape) == total.numel():  # (else more dimensions than sent: flat)
        total = total.reshape(shape)
    if count == comm.env.world_size or not weights or weights >= count - 1e-6:
        return total  # every rank's share, or sums (each of fraction 1)
    return total / weights
