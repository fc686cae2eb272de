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
a structure of the output holds one entry per sample; a plain record object (a
torchtext-style ``Batch`` of attributes, BiDAF-pytorch's ``batch.c_word``) is
split attribute by attribute (``record_fields``). Before the first split is
trusted, it is checked against the share collated alone, under the same random
state: each tensor of the share must be the split's, cut to the share's own
padding, and later batches are split along the same dimensions. A 1-D tensor that
joins the samples' variable-length entries (CTC's concatenated targets, with a
per-sample lengths tensor beside it in the output) is cut at the lengths'
offsets. A ``collate_fn`` that reorders the samples (sorts them by length, for
``pack_padded_sequence``) is checked against the samples that took the share's
places: those the sort moved there where it sorts the list it is given in place,
or else those that, collated alone, give the share's rows (a sort of a copy; the
first batch collates each sample alone once for it). Its rows of the sorted
global batch are then its share. Where the output cannot be split so (a count of the batch's tokens,
packed sequences, a collation that draws random numbers), every rank collates
its own share: the loader warns once, or, where the share's tensors are padded
to another length than the global batch's (the model would read other
padding), raises ShardingError.
"""

from __future__ import annotations

import copy
import random
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
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
        #: Of a joined tensor (``JOINED``): the place of the lengths it is cut by.
        self.cut_by: dict[tuple, tuple] = {}

    def __call__(self, samples: list[Any]) -> Any:
        lo, hi = chunk_bounds(len(samples), self.world, self.rank)
        share = samples[lo:hi] or samples[:1]  # an empty share: the structure only
        if not self.whole:
            return self.inner(share)
        if self.dims is None:
            if hi == lo:  # nothing to check the split against yet
                return self.inner(samples[:1])
            state = _random_state()
            everything = list(samples)  # before an in-place sort
            collated = self.inner(samples)
            after = _random_state()
            shares = [share]
            moved = samples[lo:hi]
            if any(a is not b for a, b in zip(moved, share, strict=True)):
                # sorted in place (by length, for pack_padded_sequence): the
                # output's rows [lo, hi) are the samples now in those places
                shares.append(moved)
            owns = []
            for candidate in shares:
                _set_random_state(state)
                owns.append(self.inner(list(candidate)))
            _set_random_state(after)
            for own in owns:
                for entries_first in (True, False):
                    split = Split(lo, hi, len(samples), entries_first=entries_first)
                    rows = split.take(collated)
                    if rows is not _UNSPLIT and _cut_of(own, rows, split.dims):
                        self.dims, self.cut_by = split.dims, split.cut_by
                        return rows
            reordered = self._reordered_rows(everything, collated, lo, hi, state)
            _set_random_state(after)
            if reordered is not None:
                return reordered
            own = owns[0]
            self._give_up(own, collated, len(share), len(samples))
            return own
        collated = self.inner(samples)
        rows = Split(lo, hi, len(samples), self.dims, cut_by=self.cut_by).take(collated)
        if rows is _UNSPLIT:
            own = self.inner(share)
            self._give_up(own, collated, len(share), len(samples))
            return own
        return rows

    def _reordered_rows(
        self,
        everything: list[Any],
        collated: Any,
        lo: int,
        hi: int,
        state: tuple[Any, ...],
    ) -> Any:
        """Rows [lo, hi) of the output of a ``collate_fn`` that reorders the
        samples in a copy (``sorted(batch, key=len, reverse=True)``): each row is
        matched to the sample that, collated alone, gives it (cut to its own
        padding), and the matched samples collated together must give the rows.
        None where no such samples are found (the first batch only)."""
        size = len(everything)
        singles = []
        for sample in everything:
            _set_random_state(state)
            try:
                singles.append(self.inner([sample]))
            except Exception:  # a collation that needs more than one sample
                return None
        for entries_first in (True, False):
            split = Split(lo, hi, size, entries_first=entries_first)
            rows = split.take(collated)
            if rows is _UNSPLIT:
                continue
            matched: list[int] = []
            for place in range(lo, hi):
                row = Split(place, place + 1, size, split.dims, cut_by=split.cut_by)
                one = row.take(collated)
                match = next(
                    (
                        i
                        for i, single in enumerate(singles)
                        if i not in matched and _cut_of(single, one, split.dims)
                    ),
                    None,
                )
                if match is None:
                    break
                matched.append(match)
            else:
                _set_random_state(state)
                own = self.inner([everything[i] for i in matched])
                if _cut_of(own, rows, split.dims):
                    self.dims, self.cut_by = split.dims, split.cut_by
                    return rows
        return None

    def _give_up(self, own: Any, collated: Any, share: int, size: int) -> None:
        padded = _padded_otherwise(own, collated, share, size)
        if padded is not None:
            from .data import ShardingError

            raise ShardingError(
                f"the loader's collate_fn ({_name(self.inner)}) gives an output for "
                "the global batch that cannot be split by samples, and a process's "
                f"share collated alone is padded otherwise ({padded}): the model "
                "would read other padding than in the original run. Return one "
                "entry per sample along the first dimension of each tensor (with "
                "any per-batch value computed from them in the training step), or "
                "pad to a fixed length"
            )
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
#: ``Split.dims`` of a 1-D tensor joining the samples' entries (``torch.cat`` of
#: variable-length targets), cut at the offsets of a lengths tensor (``cut_by``).
JOINED = -3


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
        cut_by: dict[tuple, tuple] | None = None,
    ) -> None:
        self.lo, self.hi, self.size = lo, hi, size
        self.given = dims
        self.dims: dict[tuple, int] = {}
        #: Per joined tensor: the place of its lengths (given, or found now).
        self.cut_by: dict[tuple, tuple] = dict(cut_by or {})
        #: The output's 1-D integer tensors of one entry per sample, by place.
        self._lengths: dict[tuple, torch.Tensor] = {}
        #: A sequence of ``size`` tensors: one per sample (detection images), or
        #: the output's parts (``(src, tgt)`` of a batch of 2)? Tried in turn.
        self.entries_first = entries_first

    def take(self, batch: Any, path: tuple = ()) -> Any:
        if not path:
            self._lengths = dict(_lengths_in(batch, self.size))
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
        fields = record_fields(batch)
        if fields:
            # a torchtext-style Batch object (BiDAF-pytorch's batch.c_word,
            # batch.s_idx, batch.id): split attribute by attribute
            taken = {k: self.take(v, (*path, k)) for k, v in fields.items()}
            if any(v is _UNSPLIT for v in taken.values()):
                return _UNSPLIT
            rows = copy.copy(batch)
            vars(rows).update(taken)
            return rows
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
        if dim == JOINED or (dim < 0 and self.given is None):
            return self._joined(tensor, path)
        if dim < 0 or dim >= tensor.dim() or tensor.shape[dim] != self.size:
            return _UNSPLIT
        self.dims[path] = dim
        # contiguous, as the share collated alone would be (`.view(-1)` after)
        return tensor.narrow(dim, self.lo, self.hi - self.lo).contiguous()

    def _joined(self, tensor: torch.Tensor, path: tuple) -> Any:
        """The share's entries of a 1-D tensor that joins the samples' entries,
        cut by the lengths beside it in the output (one lengths tensor whose sum
        is its length; several only if they are equal)."""
        if tensor.dim() != 1:
            return _UNSPLIT
        total = tensor.shape[0]
        if self.given is not None:
            source = self.cut_by.get(path)
            lengths = self._lengths.get(source) if source is not None else None
        else:
            matching = [p for p, t in self._lengths.items() if int(t.sum()) == total]
            if not matching or any(
                not torch.equal(self._lengths[p], self._lengths[matching[0]])
                for p in matching[1:]
            ):
                return _UNSPLIT
            source, lengths = matching[0], self._lengths[matching[0]]
        if lengths is None or int(lengths.sum()) != total or bool((lengths < 0).any()):
            return _UNSPLIT
        start = int(lengths[: self.lo].sum())
        stop = start + int(lengths[self.lo : self.hi].sum())
        self.dims[path] = JOINED
        self.cut_by[path] = source  # type: ignore[assignment]
        return tensor[start:stop].contiguous()


def _lengths_in(
    batch: Any, size: int, path: tuple = ()
) -> Iterator[tuple[tuple, torch.Tensor]]:
    """The 1-D integer tensors of ``size`` entries in ``batch``, with their places."""
    if isinstance(batch, torch.Tensor):
        if (
            batch.dim() == 1
            and batch.shape[0] == size
            and not batch.is_floating_point()
        ):
            yield path, batch
    elif isinstance(batch, Mapping):
        for key, value in batch.items():
            yield from _lengths_in(value, size, (*path, key))
    elif isinstance(batch, (list, tuple)):
        for i, value in enumerate(batch):
            yield from _lengths_in(value, size, (*path, i))
    elif fields := record_fields(batch):
        for key, value in fields.items():
            yield from _lengths_in(value, size, (*path, key))


def _padded_otherwise(own: Any, collated: Any, share: int, size: int) -> str | None:
    """Where a tensor of the share collated alone (``own``, ``share`` samples) is
    padded to another length than the same tensor of the global batch's
    (``collated``, ``size`` samples): a dimension past the samples' (the first,
    or the second where the first is a sequence's) of another size. None where
    none is, or the two are not the same structure."""
    if isinstance(own, torch.Tensor):
        if not isinstance(collated, torch.Tensor) or own.dim() != collated.dim():
            return None
        if own.dim() < 2:
            return None
        samples = 1 if own.shape[1] == share and collated.shape[1] == size else 0
        for d in range(own.dim()):
            if d != samples and own.shape[d] != collated.shape[d]:
                return (
                    f"dimension {d}: {own.shape[d]} for this process's "
                    f"{share} samples, {collated.shape[d]} for the global batch's "
                    f"{size}"
                )
        return None
    if isinstance(own, Mapping) and isinstance(collated, Mapping):
        pairs = [(own[k], collated[k]) for k in own if k in collated]
    elif isinstance(own, (list, tuple)) and isinstance(collated, (list, tuple)):
        pairs = list(zip(own, collated, strict=False))
    elif (fields := record_fields(own)) and type(own) is type(collated):
        theirs = record_fields(collated) or {}
        pairs = [(fields[k], theirs[k]) for k in fields if k in theirs]
    else:
        return None
    for a, b in pairs:
        found = _padded_otherwise(a, b, share, size)
        if found is not None:
            return found
    return None


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
        if dim == JOINED:
            return own.shape == rows.shape and bool(torch.equal(own, rows))
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
    fields = record_fields(own)
    if fields and type(own) is type(rows):
        theirs = record_fields(rows) or {}
        return list(fields) == list(theirs) and all(
            _cut_of(fields[k], theirs[k], dims, (*path, k)) for k in fields
        )
    try:
        return bool(own == rows)
    except Exception:  # an object without a plain equality
        return False


def record_fields(value: Any) -> dict[str, Any] | None:
    """The attributes of a plain record object that a ``collate_fn`` returns
    (a torchtext-style ``Batch`` with ``c_word``, ``s_idx``, ``id``): an instance
    of a class of the script with a ``__dict__``, not a tensor, mapping,
    sequence, module, class or function. None for anything else."""
    if isinstance(value, (torch.Tensor, Mapping, list, tuple, str, bytes, type)):
        return None
    if callable(value) or isinstance(value, types.ModuleType):
        return None
    if type(value).__module__ in ("builtins", "numpy", "torch"):
        return None
    fields = getattr(value, "__dict__", None)
    return dict(fields) if isinstance(fields, dict) else None


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
