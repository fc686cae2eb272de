"""Batch iterators that are not DataLoaders (AM019): torchtext's legacy
``BucketIterator`` / ``Iterator`` / ``BPTTIterator``, and a project's own class
built from data rather than a loader (pytorch/examples snli's iterator of
``Batch`` objects with ``init_epoch()``). ``accel.prepare_dataloader`` cannot
split them, so a training loop over one runs every batch on every process."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .analysis import attr_chain

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: torchtext's legacy iterators (``torchtext.data`` before 0.9, then
#: ``torchtext.legacy.data``).
TORCHTEXT_ITERATORS = frozenset(
    f"torchtext.{package}data.{name}"
    for package in ("", "legacy.")
    for name in ("BucketIterator", "Iterator", "BPTTIterator")
)


def unsplit_iterator(index: ModuleIndex, iterable: cst.BaseExpression) -> str | None:
    """How the loop's iterable (through ``enumerate``/``tqdm``) is made, as a
    phrase, when it is such an iterator: every value of the variable a call of
    a torchtext iterator, or of a class of a local module (not a loader, not
    migrated with this batch) handed no loader; None otherwise."""
    inner = index._loop_wrapped(iterable)
    while inner is not None:
        iterable, inner = inner, index._loop_wrapped(inner)
    if not isinstance(iterable, (cst.Name, cst.Attribute)):
        return None
    key = index.key(iterable)
    values = index.values.get(key, []) if key is not None else []
    found = [_made_by(index, v) for v in values]
    if not found or any(f is None for f in found):
        return None
    return found[0]


def _made_by(index: ModuleIndex, value: cst.BaseExpression | None) -> str | None:
    if not isinstance(value, cst.Call):
        return None
    if any(index.holds_tagged(a.value, index.loaders) for a in value.args):
        return None  # a wrapper of a loader (a prefetcher): it reads the loader
    names = index.qualnames(value.func)
    spelled = attr_chain(value.func) or "the iterator"
    if names & TORCHTEXT_ITERATORS:
        return f"`{spelled}`, torchtext's iterator"
    helper = index.helper(value.func)
    if (
        helper is None
        or helper.kind != "class"
        or helper.returns
        or helper.batch_migrated
        or helper.batch_library
    ):
        return None
    return f"`{spelled}`, a class of {helper.file}"
