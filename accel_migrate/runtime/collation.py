"""A script's own ``collate_fn`` run on the global batch, then split by rows.

Torch's default collation stacks samples, so a rank that collates its share gets
exactly its rows of the global batch. A script's own ``collate_fn`` often does
not: one that pads to the longest sequence of its batch pads a share to the
share's longest, and a recurrent encoder that reads the padding, or a mean over
the time axis, then computes another loss than the original's. So, in global
batch mode, a loader with its own ``collate_fn`` collates the whole global batch
on every rank (every rank loads every sample of it) and keeps this rank's rows.

The samples are split where that is unambiguous: every tensor of the output
has the batch's samples along its first dimension, or its second (sequence
first, as ``pad_sequence`` pads by default), and every list or tuple that is not
a structure of the output holds one entry per sample. Before the first split is
trusted, it is checked against the share collated alone, under the same random
state: each tensor of the share must be the split's, cut to the share's own
padding, and later batches are split along the same dimensions. Where the output
cannot be split so (a count of the batch's tokens, packed sequences, a collation
that draws random numbers), the loader warns once and every rank collates its
own share, as before.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from .data import chunk_bounds

#: Not splittable: a value of the output that is not one entry per sample.
_UNSPLIT = object()


def needs_global(collate_fn: Any) -> bool:
    """Is ``collate_fn`` the script's own (not torch's default stacking)?"""
    from torch.utils.data import _utils

    defaults = (_utils.collate.default_collate, _utils.collate.default_convert)
    return collate_fn not in defaults


class GlobalCollate:
    """The ``collate_fn`` a sharded loader runs in global batch mode: the script's
    ``inner`` on the whole batch, then this rank's rows (see the module docstring).
    A plain object of plain attributes, so that loader workers can pickle it."""

    def __init__(self, inner: Callable[[list[Any]], Any], world: int, rank: int):
        self.inner = inner
        self.world, self.rank = world, rank
        #: Whole-batch collation is in use (False once it was found not to split).
        self.whole = True
        #: The samples' dimension of each tensor of the output, in order (batch
        #: first, or sequence first as ``pad_sequence`` pads): set by the first
        #: split, which is checked against the share collated alone.
        self.dims: dict[tuple, int] | None = None

    def __call__(self, samples: list[Any]) -> Any:
        lo, hi = chunk_bounds(len(samples), self.world, self.rank)
        share = samples[lo:hi] or samples[:1]  # an empty share: the structure only
        if not self.whole:
            return self.inner(share)
        if self.dims is None:
            if hi == lo:  # nothing to check the split against yet
                return self.inner(samples[:1])
            state = _random_state()
            collated = self.inner(samples)
            after = _random_state()
            _set_random_state(state)
            own = self.inner(share)
            _set_random_state(after)
            for entries_first in (True, False):
                split = Split(lo, hi, len(samples), entries_first=entries_first)
                rows = split.take(collated)
                if rows is not _UNSPLIT and _cut_of(own, rows, split.dims):
                    self.dims = split.dims
                    return rows
            self._give_up()
            return own
        rows = Split(lo, hi, len(samples), self.dims).take(self.inner(samples))
        if rows is _UNSPLIT:
            self._give_up()
            return self.inner(share)
        return rows

    def _give_up(self) -> None:
        self.whole = False
        warnings.warn(
            f"the loader's collate_fn ({_name(self.inner)}) gives an output for the "
            "global batch that cannot be split by samples (its tensors do not all "
            "have the samples along their first dimension, or it holds values of "
            "the whole batch); each process collates its own share: padding to a "
            "batch's longest sample is then to the share's longest",
            RuntimeWarning,
            stacklevel=2,
        )


def take_rows(batch: Any, lo: int, hi: int, size: int) -> Any:
    """Rows [lo, hi) of every per-sample value of ``batch``, or ``_UNSPLIT``."""
    return Split(lo, hi, size).take(batch)


#: ``Split.dims`` of a list or tuple that holds one entry per sample.
ENTRIES = -2


class Split:
    """Takes samples [lo, hi) of a collated batch of ``size`` samples.

    ``dims`` maps each place of the output (the path of keys and positions to it)
    to where its samples lie: a tensor's dimension (its first of ``size`` among
    the first two: batch first, or sequence first as ``pad_sequence`` pads), or
    ``ENTRIES`` for a list or tuple of one entry per sample. Given (from the first
    batch), every later batch is split the same way or not at all."""

    def __init__(
        self,
        lo: int,
        hi: int,
        size: int,
        dims: dict[tuple, int] | None = None,
        entries_first: bool = True,
    ) -> None:
        self.lo, self.hi, self.size = lo, hi, size
        self.given = dims
        self.dims: dict[tuple, int] = {}
        #: A sequence of ``size`` tensors: one per sample (detection images), or
        #: the output's parts (``(src, tgt)`` of a batch of 2)? Tried in turn.
        self.entries_first = entries_first

    def take(self, batch: Any, path: tuple = ()) -> Any:
        if batch is None:
            return None
        if isinstance(batch, torch.Tensor):
            return self._tensor(batch, path)
        if isinstance(batch, Mapping):
            items = {k: self.take(v, (*path, k)) for k, v in batch.items()}
            if any(v is _UNSPLIT for v in items.values()):
                return _UNSPLIT
            try:
                return type(batch)(items)  # type: ignore[call-arg]
            except TypeError:
                return _UNSPLIT
        if isinstance(batch, tuple) and hasattr(batch, "_fields"):
            parts = [self.take(v, (*path, i)) for i, v in enumerate(batch)]
            return _UNSPLIT if _UNSPLIT in parts else type(batch)(*parts)
        if isinstance(batch, (list, tuple)):
            return self._sequence(batch, path)
        return _UNSPLIT

    def _sequence(self, batch: list | tuple, path: tuple) -> Any:
        if self.given is not None:
            entries = self.given.get(path) == ENTRIES
        elif len(batch) == self.size and (
            self.entries_first or not all(_structured(v) for v in batch)
        ):
            entries = True
        else:
            entries = None  # try the parts first
        if not entries:
            parts = [self.take(v, (*path, i)) for i, v in enumerate(batch)]
            if not any(p is _UNSPLIT for p in parts):
                return type(batch)(parts)
            if entries is False or self.given is not None:
                return _UNSPLIT
            for key in [k for k in self.dims if k[: len(path)] == path]:
                del self.dims[key]  # its tensors are samples, not split
        if len(batch) != self.size:
            return _UNSPLIT
        self.dims[path] = ENTRIES
        return type(batch)(batch[self.lo : self.hi])

    def _tensor(self, tensor: torch.Tensor, path: tuple) -> Any:
        if self.given is not None:
            dim = self.given.get(path, -1)
        else:
            dim = next(
                (
                    d
                    for d in range(min(tensor.dim(), 2))
                    if tensor.shape[d] == self.size
                ),
                -1,
            )
        if dim < 0 or dim >= tensor.dim() or tensor.shape[dim] != self.size:
            return _UNSPLIT
        self.dims[path] = dim
        # contiguous, as the share collated alone would be (`.view(-1)` after)
        return tensor.narrow(dim, self.lo, self.hi - self.lo).contiguous()


def _structured(value: Any) -> bool:
    """A value that is a part of the output's structure (a tensor of the batch's
    rows, a dict), not one sample's entry."""
    return isinstance(value, (torch.Tensor, Mapping))


def _cut_of(own: Any, rows: Any, dims: dict[tuple, int], path: tuple = ()) -> bool:
    """Is ``own`` (the share collated alone) ``rows`` (the split) cut to its own
    padding: the same structure, each tensor the leading corner of the split's,
    with as many samples along its samples' dimension (``dims``)?"""
    if isinstance(own, torch.Tensor):
        if not isinstance(rows, torch.Tensor) or own.dim() != rows.dim():
            return False
        if own.dtype != rows.dtype:
            return False
        dim = dims.get(path)
        if dim is not None and (dim < 0 or own.shape[dim] != rows.shape[dim]):
            return False
        if any(a > b for a, b in zip(own.shape, rows.shape, strict=True)):
            return False
        corner = rows[tuple(slice(0, n) for n in own.shape)]
        return bool(torch.equal(own, corner))
    if isinstance(own, Mapping):
        return (
            isinstance(rows, Mapping)
            and list(own) == list(rows)
            and all(_cut_of(own[k], rows[k], dims, (*path, k)) for k in own)
        )
    if isinstance(own, (list, tuple)):
        return (
            isinstance(rows, (list, tuple))
            and len(own) == len(rows)
            and all(
                _cut_of(a, b, dims, (*path, i))
                for i, (a, b) in enumerate(zip(own, rows, strict=True))
            )
        )
    try:
        return bool(own == rows)
    except Exception:  # an object without a plain equality
        return False


def _random_state() -> tuple[Any, ...]:
    try:
        import numpy as np
    except ImportError:  # torch runs without numpy
        return (torch.get_rng_state(), None, random.getstate())
    return (torch.get_rng_state(), np.random.get_state(), random.getstate())


def _set_random_state(state: tuple[Any, ...]) -> None:
    torch.set_rng_state(state[0])
    if state[1] is not None:
        import numpy as np

        np.random.set_state(state[1])
    random.setstate(state[2])


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
