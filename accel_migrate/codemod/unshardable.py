"""DataLoaders the runtime refuses to shard, recognised from the source.

``accel.prepare_dataloader`` splits batches by sample index; a loader whose
samples have none (over an ``IterableDataset``) or that yields single samples
(``batch_size=None``) is refused with ``runtime.data.ShardingError`` once the
script runs on several processes; one whose batches must not be split (one
sample a batch, or samples ranked against each other: ``unsplit_loaders``) is
left whole too. Such a loader is left unwrapped and reported
for review (AM006), and no rule treats it as a sharded loader: every process
reads all of it, so sums over it must not be combined across processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .analysis import attr_chain

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: Bases (qualified-name prefixes) that make a class of the file an iterable dataset.
ITERABLE_BASES = (
    "torch.utils.data.IterableDataset",
    "torch.utils.data.dataset.IterableDataset",
    "torch.utils.data.IterDataPipe",
    "torch.utils.data.datapipes.datapipe.IterDataPipe",
    "torchdata.datapipes.iter.IterDataPipe",
    "datasets.IterableDataset",
    "webdataset.",
)
#: Library calls known to build an iterable dataset (prefixes of qualified names).
ITERABLE_CALLS = (
    *ITERABLE_BASES,
    "torch.utils.data.ChainDataset",
    "torch.utils.data.dataset.ChainDataset",
    "torch.utils.data.datapipes.iter.",
    "torchdata.datapipes.iter.",
    # torchtext's datasets are iterable datapipes since torchtext 0.12.
    "torchtext.datasets.",
)
#: Methods that return an iterable dataset whatever they are called on.
_ITERABLE_METHODS = frozenset({"to_iterable_dataset"})
_DEPTH = 4


def unshardable_reason(index: ModuleIndex, call: cst.Call) -> str | None:
    """Why ``call`` (a ``DataLoader(...)``) cannot be sharded, or None."""
    cache: dict[int, str | None] = index.__dict__.setdefault("_unshardable", {})
    key = id(call)
    if key not in cache:
        cache[key] = _reason(index, call)
    return cache[key]


def _reason(index: ModuleIndex, call: cst.Call) -> str | None:
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    batch_size = keywords.get(
        "batch_size", positional[1] if len(positional) > 1 else None
    )
    if (
        isinstance(batch_size, cst.Name)
        and batch_size.value == "None"
        and "batch_sampler" not in keywords
    ):
        return (
            "DataLoader(batch_size=None) yields single samples, not batches: the "
            "runtime cannot shard it, so it is left unwrapped and every process reads "
            "all of it. Give it a batch_size, or split the samples by accel.rank() and "
            "accel.world_size() yourself"
        )
    dataset = keywords.get("dataset", positional[0] if positional else None)
    what = _iterable_dataset(index, dataset, _DEPTH) if dataset is not None else None
    if what is None:
        from .unsplit_loaders import unsplit_reason

        # one sample a batch, or batches whose samples are ranked: left whole
        return unsplit_reason(index, call)
    return (
        f"DataLoader over an IterableDataset ({what}): the runtime cannot shard it "
        "(its samples have no index to split by), so it is left unwrapped and every "
        "process reads all of it. Split the stream in its __iter__ by accel.rank() "
        "and accel.world_size(), or give the dataset __getitem__ and __len__ and "
        "wrap the loader with accel.prepare_dataloader(...)"
    )


def _iterable_dataset(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int
) -> str | None:
    """A name for ``expr`` when it is (or, on some path, may be) an iterable dataset."""
    if depth == 0:
        return None
    if isinstance(expr, cst.IfExp):
        found = _iterable_dataset(index, expr.body, depth) or _iterable_dataset(
            index, expr.orelse, depth
        )
        return f"{found}, on one branch of an if-else" if found else None
    if isinstance(expr, cst.Call):
        return _iterable_call(index, expr)
    key = index.key(expr)
    if key is None:
        return None
    for value in index.values.get(key, []):
        if value is not None and (found := _iterable_dataset(index, value, depth - 1)):
            return found
    return None


def _iterable_call(index: ModuleIndex, call: cst.Call) -> str | None:
    local = index.local_class(call.func)
    if local is not None:
        if local in index.local_subclasses(ITERABLE_BASES):
            return f"{local.name.value}, a class of this file"
        return None
    names = index.qualnames(call.func)
    for name in sorted(names):
        if name.startswith(ITERABLE_CALLS):
            return name.rsplit(".", 1)[-1]
        if name in ("datasets.load_dataset", "datasets.load.load_dataset") and any(
            a.keyword is not None
            and a.keyword.value == "streaming"
            and isinstance(a.value, cst.Name)
            and a.value.value == "True"
            for a in call.args
        ):
            return "load_dataset(..., streaming=True)"
    chain = attr_chain(call.func) or ""
    if chain.rsplit(".", 1)[-1] in _ITERABLE_METHODS:
        return f"{chain}()"
    return None
