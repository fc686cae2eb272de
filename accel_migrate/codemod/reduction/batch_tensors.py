"""Loops a list of losses may walk, proven what they walk: a parsed
command-line option (a fixed count), a loader loop's variable (a tensor).

An option of the parsed command line (``for s in args.scales``, ``nargs="+"``)
is the same on every process and for every batch: a loop over it walks a
fixed count of terms, where the file never writes the option
(``args.scales = ...``, ``args.scales.append(...)``, ``setattr``).

Is a variable a loader loop binds proven a tensor (whose loop walks the
batch's samples), not a list of per-task targets?

A loader's default collate keeps a list where a dataset's item holds one
(``return x, [y_cls, y_box]``): ``for x, ys in loader`` binds ``ys`` to a
list of one tensor per task, and ``for t in ys`` walks the tasks (a fixed
count: a sum of their means is a mean of means), not the samples. The two
are told apart only where the file proves which: the variable is read as a
tensor (``ys.to(device)``, ``ys.size(0)``, ``ys.float()``: a list has no such
attribute), or every loader the loop steps through is built over a
``TensorDataset`` (each item a tuple of tensor rows). It is proven the list
(a fixed count of tasks) where every loader is a ``DataLoader`` with the
default collate over a dataset class of the file whose every
``__getitem__`` return is a tuple display holding a list or tuple display
at the variable's place (``return x, [a, b]``).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..batch_rows import loader_loop_bindings
from ..names import DATALOADER_CALLS
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex

#: Attributes a tensor has and a list, tuple or dict has not.
TENSOR_ATTRIBUTES = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "size",
        "shape",
        "float",
        "long",
        "half",
        "double",
        "view",
        "reshape",
        "numel",
        "dim",
        "squeeze",
        "unsqueeze",
        "permute",
        "contiguous",
        "detach",
        "type",
        "dtype",
        "device",
        "ndim",
    }
)
_TENSOR_DATASETS = frozenset(
    {"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"}
)
#: Calls a loop over a loader goes through to its first argument.
_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip"})


class BatchTensors:
    """The file's facts the loops of a loss list are read from, each computed
    once per tree (``ModuleIndex.batch_tensors``)."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index

    @cached_property
    def loader_targets(self) -> dict[Key, list[tuple[cst.For, cst.BaseExpression]]]:
        """The variables a data loader's loop binds (not its ``enumerate``
        counter): a bound name, or a name of a bound tuple; each with the loops
        that bind it and what each binds."""
        index = self.index
        found: dict[Key, list[tuple[cst.For, cst.BaseExpression]]] = {}
        for loop, item in loader_loop_bindings(index):
            names = item.elements if isinstance(item, cst.Tuple) else [item]
            for name in names:
                node = name.value if isinstance(name, cst.Element) else name
                key = index.key(node) if isinstance(node, cst.Name) else None
                if key is not None:
                    found.setdefault(key, []).append((loop, item))
        return found

    @cached_property
    def tensor_keys(self) -> frozenset[Key]:
        """The variables the file reads a tensor-only attribute of (``ys.to``)."""
        found: set[Key] = set()
        for node in findall(self.index.module, m.Attribute(value=m.Name())):
            assert isinstance(node, cst.Attribute)
            if node.attr.value in TENSOR_ATTRIBUTES:
                key = self.index.key(node.value)  # type: ignore[arg-type]
                if key is not None:
                    found.add(key)
        return frozenset(found)

    @cached_property
    def written_options(self) -> frozenset[str] | None:
        """The attribute names the file writes on a parsed namespace (bound,
        grown in place, or item-stored); None where a ``setattr`` may write any."""
        index = self.index
        if findall(index.module, m.Call(func=m.Name("setattr"))):
            return None
        namespaces = index.rank_local_options.namespaces
        found: set[str] = set()
        for node in findall(index.module, m.Attribute()):
            assert isinstance(node, cst.Attribute)
            if not namespaces.holds(node.value):
                continue
            parent = index.parent(node)
            if (
                isinstance(parent, (cst.AssignTarget, cst.AugAssign))
                or (isinstance(parent, cst.Attribute) and parent.attr.value in _GROWERS)
                or (
                    isinstance(parent, cst.Subscript)
                    and isinstance(
                        index.parent(parent), (cst.AssignTarget, cst.AugAssign)
                    )
                )
            ):
                found.add(node.attr.value)
        return frozenset(found)


def tensor_target(index: ModuleIndex, key: Key, loops: list[cst.For]) -> bool:
    """Is ``key`` (bound by ``loops``, loops over data loaders) proven a tensor?"""
    if key in index.batch_tensors.tensor_keys:
        return True
    return bool(loops) and all(_over_tensor_dataset(index, loop.iter) for loop in loops)


#: Methods that change a list in place.
_GROWERS = frozenset({"append", "extend", "insert", "pop", "remove", "clear"})


def parsed_option(index: ModuleIndex, attribute: cst.Attribute) -> bool:
    """Is ``attribute`` an option of a parsed command-line namespace that the
    file never writes (``args.scales`` of ``parser.parse_args()``)?"""
    if not index.rank_local_options.namespaces.holds(attribute.value):
        return False
    name = attribute.attr.value
    if name in index.rank_local_options.dests or name in index.rank_local_options.reset:
        return False  # differs between processes (``--local_rank``)
    written = index.batch_tensors.written_options
    return written is not None and name not in written


def _over_tensor_dataset(
    index: ModuleIndex, iterable: cst.BaseExpression, depth: int = 0
) -> bool:
    """Is every loader ``iterable`` steps through built over a TensorDataset?"""
    if depth > 4:
        return False
    if isinstance(iterable, cst.Call):
        if index.is_call_to(iterable, DATALOADER_CALLS):
            dataset = _dataset_argument(iterable)
            return dataset is not None and _tensor_dataset(index, dataset, depth + 1)
        func = iterable.func
        name = func.value if isinstance(func, cst.Name) else ""
        positional = [a.value for a in iterable.args if a.keyword is None]
        prepared = index.is_runtime_call(iterable, "prepare_dataloader")
        if (name in _WRAPPERS or prepared) and len(positional) == 1:
            return _over_tensor_dataset(index, positional[0], depth + 1)
        return False
    values = _values(index, iterable)
    return bool(values) and all(
        _over_tensor_dataset(index, v, depth + 1) for v in values
    )


def _tensor_dataset(index: ModuleIndex, expr: cst.BaseExpression, depth: int) -> bool:
    if depth > 6:
        return False
    if isinstance(expr, cst.Call):
        return index.is_call_to(expr, _TENSOR_DATASETS)
    values = _values(index, expr)
    return bool(values) and all(_tensor_dataset(index, v, depth + 1) for v in values)


def _values(index: ModuleIndex, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    key = index.key(expr) if isinstance(expr, cst.Name) else None
    values = index.values.get(key, []) if key is not None else []
    if any(v is None for v in values):
        return []
    return list(values)  # type: ignore[arg-type]


def _dataset_argument(call: cst.Call) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dataset":
            return arg.value
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return positional[0] if positional else None


def collated_list(
    index: ModuleIndex, loops: list[tuple[cst.For, cst.BaseExpression]], key: Key
) -> bool:
    """Is ``key``, bound at one place of each of ``loops``' items (a loop over
    a loader, what it binds), a list the default collate keeps, of as many
    tensors on every process and every batch?"""
    if not loops:
        return False
    for loop, item in loops:
        if not isinstance(item, (cst.Tuple, cst.List)):
            return False
        places = [
            i
            for i, e in enumerate(item.elements)
            if isinstance(e.value, cst.Name) and index.key(e.value) == key
        ]
        if len(places) != 1 or any(
            isinstance(e, cst.StarredElement) for e in item.elements
        ):
            return False
        loaders = _loaders(index, loop.iter, 0)
        if not loaders or not all(
            _listed_at(index, loader, places[0], len(item.elements))
            for loader in loaders
        ):
            return False
    return True


def _loaders(
    index: ModuleIndex, iterable: cst.BaseExpression, depth: int
) -> list[cst.Call]:
    """The ``DataLoader(...)`` calls ``iterable`` steps through; [] where one
    is not such a call."""
    if depth > 4:
        return []
    if isinstance(iterable, cst.Call):
        if index.is_call_to(iterable, DATALOADER_CALLS):
            return [iterable]
        func = iterable.func
        name = func.value if isinstance(func, cst.Name) else ""
        positional = [a.value for a in iterable.args if a.keyword is None]
        prepared = index.is_runtime_call(iterable, "prepare_dataloader")
        if (name in _WRAPPERS or prepared) and len(positional) == 1:
            return _loaders(index, positional[0], depth + 1)
        return []
    found: list[cst.Call] = []
    values = _values(index, iterable)
    for value in values:
        inner = _loaders(index, value, depth + 1)
        if not inner:
            return []
        found += inner
    return found


def _listed_at(index: ModuleIndex, loader: cst.Call, place: int, size: int) -> bool:
    """Does ``loader`` (default collate) yield items of ``size`` parts with a
    list display at ``place``: its dataset a call of a class of the file whose
    every ``__getitem__`` return is such a tuple display?"""
    if any(
        a.keyword is not None and a.keyword.value == "collate_fn" for a in loader.args
    ):
        return False
    dataset = _dataset_argument(loader)
    values = [dataset] if isinstance(dataset, cst.Call) else []
    if dataset is not None and not values:
        values = [v for v in _values(index, dataset) if isinstance(v, cst.Call)]
        if len(values) != len(_values(index, dataset)):
            return False
    if not values:
        return False
    for call in values:
        assert isinstance(call, cst.Call)
        cls = index.local_class(call.func)
        if cls is None:
            return False
        getters = [
            f
            for f in cls.body.body
            if isinstance(f, cst.FunctionDef) and f.name.value == "__getitem__"
        ]
        if len(getters) != 1:
            return False
        returns = [
            r
            for r in findall(getters[0].body, m.Return())
            if not any(
                isinstance(a, (cst.FunctionDef, cst.Lambda)) and a is not getters[0]
                for a in index.ancestors(r)
            )
        ]
        for returned in returns:
            value = returned.value  # type: ignore[attr-defined]
            if not (isinstance(value, cst.Tuple) and len(value.elements) == size):
                return False
            part = value.elements[place]
            if isinstance(part, cst.StarredElement) or not isinstance(
                part.value, (cst.List, cst.Tuple)
            ):
                return False
            if any(isinstance(e, cst.StarredElement) for e in part.value.elements):
                return False
        if not returns:
            return False
    return True
