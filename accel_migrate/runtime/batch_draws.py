"""Random numbers for the whole global batch, of which each rank keeps its rows.

A single-process script draws a step's random numbers for the whole batch (GAN
noise ``torch.randn(b, nz)``, a VAE's ``torch.randn_like(std)``, a gradient
penalty's ``torch.rand(b, 1)``). After sharding, a rank that drew for its own
share would draw fewer numbers, from the start of the stream: not the rows the
original gave its samples, and its random state would then run apart from the
original's. ``batch_draw`` draws what the original drew, the global batch's rows,
and returns this rank's slice of them (the rows of its samples, see
``data.chunk_bounds``). Every rank draws the same numbers, so their random
states stay in step with the original's.

It needs the current step's share, which a sharded loader records as it yields
a batch, and the default global batch mode. Anything else (one process, no
sharded loader yet, per-device batches, a row count that is not this rank's
share of the current batch) draws as asked, which is what the script did before
migration; the last case warns once per place, since the codemod expected the
batch's size there.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from ._state import peek_runtime
from .data import chunk_bounds

T = TypeVar("T")

_WARNED: set[tuple[str, int]] = set()
#: The global batch's row count while a draw for it runs, else None. ``verify
#: --deterministic`` keys such a draw's rows by their position in the global batch.
_drawing_rows: int | None = None


def global_rows_drawing() -> int | None:
    """The row count of the draw for the global batch being made now, if any."""
    return _drawing_rows


def _draw_global(draw: Callable[..., T], total: int, *args: Any, **kwargs: Any) -> T:
    global _drawing_rows
    _drawing_rows = total
    try:
        return draw(*args, **kwargs)
    finally:
        _drawing_rows = None


def _slice_bounds() -> tuple[int, int, int, int] | None:
    """(local, total, lo, hi) of the current step's share, where rows can be sliced."""
    runtime = peek_runtime()
    if runtime is None or not runtime.env.distributed:
        return None
    if runtime.config.batch_mode != "global" or not runtime.batch_share_known():
        return None
    local, total = runtime.batch_share()
    lo, hi = chunk_bounds(total, runtime.env.world_size, runtime.env.rank)
    return local, total, lo, hi


def _warn_mismatch(rows: int, local: int, total: int) -> None:
    frame = sys._getframe(2)
    place = (frame.f_code.co_filename, frame.f_lineno)
    if place in _WARNED:
        return
    _WARNED.add(place)
    warnings.warn(
        f"accel.batch_draw at {place[0]}:{place[1]}: {rows} rows asked, but this "
        f"process holds {local} of the current batch's {total} samples; drawing "
        f"{rows} rows here, which are not the original's",
        RuntimeWarning,
        stacklevel=3,
    )


def _own_rows(full: T, total: int, lo: int, hi: int) -> T:
    length = full.shape[0] if hasattr(full, "shape") and full.shape else None  # type: ignore[attr-defined]
    if length is None and isinstance(full, (list, tuple)):
        length = len(full)
    if length != total:
        raise RuntimeError(
            f"accel.batch_draw: the draw for the global batch of {total} samples "
            f"returned {length} rows; give it a draw whose first dimension is the "
            f"row count it is passed"
        )
    return full[lo:hi]  # type: ignore[index]


def batch_draw(rows: int, draw: Callable[[int], T]) -> T:
    """``draw(rows)``, made for the whole global batch: ``draw(global rows)``
    sliced to this process's rows. ``rows`` is this process's share of the batch
    (``x.size(0)``), as the migrated script computes it."""
    bounds = _slice_bounds()
    if bounds is None:
        return draw(rows)
    local, total, lo, hi = bounds
    if int(rows) != local:
        _warn_mismatch(int(rows), local, total)
        return draw(rows)
    return _own_rows(_draw_global(draw, total, total), total, lo, hi)


def batch_draw_like(
    draw: Callable[..., torch.Tensor], like: torch.Tensor, *args: Any, **kwargs: Any
) -> torch.Tensor:
    """``draw(like, ...)`` (``torch.randn_like``, ``torch.rand_like``...), made for
    the whole global batch when ``like``'s first dimension is this process's
    share of it."""
    bounds = _slice_bounds()
    if bounds is None or like.dim() == 0 or not like.is_contiguous():
        # A permuted `like` lays its draw out in its own order: not sliceable by rows.
        return draw(like, *args, **kwargs)
    local, total, lo, hi = bounds
    if like.shape[0] != local:
        _warn_mismatch(like.shape[0], local, total)
        return draw(like, *args, **kwargs)
    full = like.new_empty((total, *like.shape[1:]))
    return _own_rows(_draw_global(draw, total, full, *args, **kwargs), total, lo, hi)
