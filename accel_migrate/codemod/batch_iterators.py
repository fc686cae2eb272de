"""Batch iterators that are not DataLoaders (AM019): torchtext's legacy
``BucketIterator`` / ``Iterator`` / ``BPTTIterator``, and a project's own class
built from data rather than a loader (pytorch/examples snli's iterator of
``Batch`` objects with ``init_epoch()``), also through a function of a local
module that returns one (Chinese-Text-Classification's ``build_iterator``
returning a ``DatasetIterater``) or a parameter every caller of the batch hands
one (``iterator_factories``). ``accel.prepare_dataloader`` cannot split them,
so a training loop over one runs every batch on every process."""

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
    if isinstance(iterable, cst.Call):
        # `for x, y in get_batches(x, y, n)`: the call itself
        return _made_by(index, iterable)
    if not isinstance(iterable, (cst.Name, cst.Attribute)):
        return None
    key = index.key(iterable)
    values = index.values.get(key, []) if key is not None else []
    if key is not None and not values and index.project is not None:
        # `for i, (x, y) in enumerate(train_iter)` of a parameter every caller
        # of the batch hands `build_iterator(train_data, config)`
        from .project_callers import caller_iterator

        handed = caller_iterator(index, key)
        return f"`{key[1]}`, {handed}" if handed else None
    found = [_made_by(index, v) for v in values]
    if not found or any(f is None for f in found):
        return None
    return found[0]


def _made_by(index: ModuleIndex, value: cst.BaseExpression | None) -> str | None:
    if not isinstance(value, cst.Call):
        return None
    from .patterns import is_loader_seed

    if any(
        index.holds_tagged(a.value, index.loaders) or is_loader_seed(index, a.value)
        for a in value.args
    ):
        return None  # a wrapper of a loader (a prefetcher): it reads the loader
    names = index.qualnames(value.func)
    spelled = attr_chain(value.func) or "the iterator"
    if names & TORCHTEXT_ITERATORS:
        return f"`{spelled}`, torchtext's iterator"
    helper = index.helper(value.func)
    if (
        helper is not None
        and helper.kind == "function"
        and helper.batch_iterator
        and not helper.returns
    ):
        # `train_iter = build_iterator(train_data, config)` (utils.py)
        return f"`{spelled}` of {helper.file}, {helper.batch_iterator}"
    if (
        helper is None
        or helper.kind != "class"
        or helper.returns
        or helper.batch_migrated
        or helper.batch_library
    ):
        return None
    if helper.loader_subclass:
        # NeighborSampler(DataLoader) of a project's sampler.py: a loader, but
        # one whose own __init__ builds it, which prepare_dataloader is not
        # put around
        return (
            f"`{spelled}`, a class of {helper.file} derived from torch's "
            "DataLoader, which accel-migrate does not prepare"
        )
    return f"`{spelled}`, a class of {helper.file}"
