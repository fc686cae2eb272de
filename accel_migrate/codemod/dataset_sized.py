"""Tensors made with one entry per sample of a sharded loader's dataset and
filled by position as its batches come.

Deep Learning with PyTorch's LunaTrainingApp keeps its per-sample metrics in
``trnMetrics_g = torch.zeros(METRICS_SIZE, len(train_dl.dataset))`` and hands
it to ``computeBatchLoss(batch_ndx, batch_tup, train_dl.batch_size,
trnMetrics_g)``, which writes the batch's labels, predictions and losses at
``start_ndx = batch_ndx * batch_size`` (``metrics_g[LOSS, start:end] =
loss_g.detach()``); ``logMetrics`` then takes means and counts over the whole
tensor. After ``accel.prepare_dataloader`` each process reads its share of the
samples only: the positions of the other processes' samples keep the zeros
they were made with, and every mean and count over the tensor mixes them in.

``dataset_sized_fills`` finds such tensors for AM029 (collected-outputs): a
tensor maker (``torch.zeros``, ``np.zeros``, ...) whose size reads
``len(L.dataset)`` of a loader ``L`` the migration shards, bound to a name
that the same function writes by subscript (``preds[i * bs:(i + 1) * bs] =
out``) or hands to a local function that writes the parameter it binds by
subscript. A tensor of that size only read (a buffer of dataset statistics
filled before the loop from the dataset itself) is not one: nothing of it is
written per batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .index_syntax import attr_chain
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

#: Calls that make a new tensor or array of a given size.
_MAKERS = frozenset(
    f"{lib}.{name}"
    for lib in ("torch", "numpy")
    for name in ("zeros", "ones", "empty", "full")
)


@dataclass(frozen=True)
class DatasetSizedFill:
    maker: cst.Call  # torch.zeros(..., len(loader.dataset), ...)
    name: str  # what it is bound to
    loader: str  # the loader whose dataset gives the size (its source)
    fill: cst.CSTNode  # the subscript write, or the call that hands it on


def dataset_sized_fills(index: ModuleIndex) -> list[DatasetSizedFill]:
    found = []
    for call in index.calls:
        if not index.qualnames(call.func) & _MAKERS:
            continue
        loader = _dataset_length_of(index, call)
        if loader is None:
            continue
        target = _bound_name(index, call)
        function = index.enclosing_function(call)
        if target is None or function is None:
            continue
        fill = _fill_in(index, function, target)
        if fill is not None:
            found.append(DatasetSizedFill(call, target.value, loader, fill))
    return found


def _dataset_length_of(index: ModuleIndex, call: cst.Call) -> str | None:
    """The loader ``L`` of a ``len(L.dataset)`` among the maker's size
    arguments (also inside a tuple or list of sizes), where ``L`` is sharded."""
    pattern = m.Call(
        func=m.Name("len"), args=[m.Arg(value=m.Attribute(attr=m.Name("dataset")))]
    )
    sizes = [a.value for a in call.args if a.keyword is None]
    for length in (found for size in sizes for found in findall(size, pattern)):
        loader = length.args[0].value.value  # type: ignore[attr-defined]
        if index.holds_tagged(loader, index.loaders):
            return attr_chain(loader) or "the loader"
    return None


def _bound_name(index: ModuleIndex, call: cst.Call) -> cst.Name | None:
    """``x`` of ``x = maker(...)`` (also with methods after the call,
    ``torch.zeros(...).to(device)``)."""
    node: cst.CSTNode = call
    parent = index.parent(node)
    while isinstance(parent, cst.Attribute) and parent.value is node:
        outer = index.parent(parent)
        if not isinstance(outer, cst.Call) or outer.func is not parent:
            return None
        node, parent = outer, index.parent(outer)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, cst.Name):
            return target
    return None


def _fill_in(
    index: ModuleIndex, function: cst.FunctionDef, name: cst.Name
) -> cst.CSTNode | None:
    """The first statement of ``function`` that writes ``name`` by subscript, or
    the first call that hands it to a local function writing it so."""
    key = index.key(name)
    for write in _subscript_writes(function):
        if index.key(write.value) == key:  # type: ignore[attr-defined]
            return write
    for call in findall(function.body, m.Call()):
        for param_key, arg in index.arguments(call):  # type: ignore[arg-type]
            if isinstance(arg, cst.Name) and index.key(arg) == key:
                callee = index.callee(call)  # type: ignore[arg-type]
                if callee is not None and _writes_param(index, callee[0], param_key):
                    return call
    return None


def _subscript_writes(function: cst.FunctionDef) -> list[cst.Subscript]:
    """The ``x[...]`` targets of assignments in ``function`` whose ``x`` is a name."""
    writes = []
    for assign in findall(function.body, m.Assign() | m.AugAssign()):
        targets = (
            [t.target for t in assign.targets]  # type: ignore[attr-defined]
            if isinstance(assign, cst.Assign)
            else [assign.target]  # type: ignore[attr-defined]
        )
        for target in targets:
            if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                writes.append(target)
    return writes


def _writes_param(index: ModuleIndex, function: cst.FunctionDef, key: Key) -> bool:
    return any(index.key(w.value) == key for w in _subscript_writes(function))


def dataset_sized_reason(fill: DatasetSizedFill, line: int) -> str:
    return (
        f"`{fill.name}` has one entry per sample of `{fill.loader}.dataset` and is "
        f"filled by position as the batches come (line {line}), but `{fill.loader}` "
        "is sharded: each process reads its share of the samples only, so the "
        "entries of the other processes' samples keep the values they were made "
        "with, and means, counts or curves over the whole tensor mix them in; "
        "gather the filled entries from every process (accel.gather) before "
        "reading it, or reduce what is computed from it"
    )
