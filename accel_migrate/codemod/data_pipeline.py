"""Code of this file that runs for the training data besides the step's own body.

Shared facts for AM020 (random draws that each process makes for its own share):
which local functions a data loader runs for every sample or batch (a Dataset's
``__getitem__``, a ``collate_fn``), and which methods of local objects a training
step calls (``fake_pool.query(fake)``, ``mix(x, y)`` running ``__call__``: calls that
``ModuleIndex.loop_paths`` cannot follow, because it resolves only plain names
and ``self.`` methods). The functions those call here are included, transitively,
methods of other local objects too (``self.cache.put(i, feat)`` where ``__init__``
set ``self.cache = FeatureCache(root)``), and the ``__call__`` of a local object
called itself (``self.transform(image)``, the transform a dataset is handed). A dataset reaches its loader directly or
through torch's wrappers (``Subset``, ``ConcatDataset`` of a list, written there
or in a variable, ``random_split``) or a local wrapper Dataset that subscripts
the object it holds (``return self.base[i]``), so a class with ``__getitem__``
that derives from no Dataset is found there too.

AM010 asks ``loader_run_function_of`` (a save there is each process's own), and
``training_caller`` (a save there that the training code also runs: no local
rewrite is right for both).
"""

from __future__ import annotations

from functools import lru_cache

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex
from .model_methods import held_instances, instance_classes, training_step
from .names import DATALOADER_CALLS
from .subtrees import findall

#: Bases of a map-style or iterable dataset (not Sampler: a sampler's draws are
#: the same on every process seeded alike, and the runtime shards its output).
DATASET_BASES = (
    "torch.utils.data.Dataset",
    "torch.utils.data.IterableDataset",
    "torch.utils.data.TensorDataset",
    "torch.utils.data.dataset.",
)
#: torch's datasets made of other datasets -> how they take them: "first" (the
#: first argument, ``Subset(ds, indices)``, ``random_split(ds, lengths)``),
#: "list" (a list of datasets, ``ConcatDataset([a, b])``) or "all" (every argument,
#: ``StackDataset(a, b)``).
_WRAPPERS = {
    f"torch.utils.data.{module}{name}": how
    for module in ("", "dataset.")
    for name, how in (
        ("Subset", "first"),
        ("random_split", "first"),
        ("ConcatDataset", "list"),
        ("ChainDataset", "list"),
        ("StackDataset", "all"),
    )
}
#: The methods a data loader calls on its dataset, per sample or per batch.
_DATASET_METHODS = ("__getitem__", "__getitems__", "__iter__")

#: A function (or lambda) run for the data -> what runs it, for a message.
Runner = cst.FunctionDef | cst.Lambda


def builds_loader(index: ModuleIndex) -> bool:
    """Does this file build a data loader?"""
    return bool(_loader_calls(index))


def _loader_calls(index: ModuleIndex) -> list[cst.Call]:
    return [
        call
        for call in index.calls
        if any(q in DATALOADER_CALLS for q in index.qualnames(call.func))
    ]


@lru_cache(maxsize=8)
def data_functions(index: ModuleIndex) -> dict[Runner, str]:
    """The local functions a data loader or a training step runs on the data, each
    with a phrase naming what runs it ("which the data loader runs for each
    sample")."""
    if not _loader_calls(index):
        return {}
    found = _loader_runners(index)
    for function in index.functions:
        if function not in found and _loader_generator(index, function):
            found[function] = (
                f"`{function.name.value}`, a generator the data loader's batches "
                "pass through"
            )
    for call in index.calls:
        func = call.func
        if isinstance(func, cst.Attribute) and not _is_self(func.value):
            # pool.query(fake): a method of a local object
            receiver, name = func.value, func.attr.value
        elif isinstance(func, cst.Name) and index.local_class(func) is None:
            # mix(x, y): the __call__ of a local object (not a class's construction)
            receiver, name = func, "__call__"
        else:
            continue
        classes = instance_classes(index, receiver)
        if not classes or not any(
            training_step(index, p) for p in index.loop_paths(call)
        ):
            continue
        for cls in _in_source_order(index, classes):
            method = _method(cls, name)
            if method is not None and method not in found:
                found[method] = (
                    f"`{cls.name.value}.{name}`, which a training step "
                    f"calls on its `{cls.name.value}` object"
                )
    _add_callees(index, found)
    # a transform of the file handed on (to an imported dataset), where no
    # dataset of the file is seen calling it (that names it better)
    handed = {
        method: phrase
        for method, phrase in _handed_transforms(index).items()
        if method not in found
    }
    if handed:
        found.update(handed)
        _add_callees(index, found)
    return found


def _handed_transforms(index: ModuleIndex) -> dict[Runner, str]:
    """The ``__call__`` of each class of the file (no model: no ``forward``)
    whose instance is built outside a training step and handed on as an
    argument, in a file that builds a data loader: ssd.pytorch's
    ``SSDAugmentation``-style ``Compose([RandomMirror(), ...])`` defined in the
    script and handed to an imported dataset (``VOCDetection(root,
    transform=...)``), which the loader applies to each sample. The same as
    ``imported_draws.transform_draw`` says of such a class of another module."""
    found: dict[Runner, str] = {}
    for call in index.calls:
        cls = index.local_class(call.func)
        if cls is None or _method(cls, "forward") is not None:
            continue
        method = _method(cls, "__call__")
        if method is None or method in found or not _handed(index, call):
            continue
        if any(training_step(index, p) for p in index.loop_paths(call)):
            continue
        found[method] = (
            f"`{cls.name.value}.__call__`, a transform built here "
            f"(`{cst.Module([]).code_for_node(call)}`) and handed on, which the "
            "data loader applies to each sample"
        )
    return found


def _handed(index: ModuleIndex, call: cst.Call) -> bool:
    """Is ``call``'s value handed to another call: inside its arguments
    (``Compose([RandomMirror()])``), or bound to a name handed so
    (``augment = ...``; ``Shapes(n, transform=augment)``)?"""
    for ancestor in index.ancestors(call):
        if isinstance(ancestor, cst.Arg):
            return True
        if isinstance(ancestor, cst.Assign):
            keys = {
                index.key(t.target)
                for t in ancestor.targets
                if isinstance(t.target, cst.Name)
            } - {None}
            return any(
                isinstance(arg.value, cst.Name) and index.key(arg.value) in keys
                for other in index.calls
                for arg in other.args
            )
        if isinstance(ancestor, cst.BaseStatement):
            return False
    return False


@lru_cache(maxsize=8)
def loader_run_functions(index: ModuleIndex) -> dict[Runner, str]:
    """The local functions a data loader runs for each sample or batch (a
    Dataset's ``__getitem__``, a ``collate_fn``) and those they call, with the
    phrase ``data_functions`` gives: each process runs them for its own share
    of the samples, a different number of times."""
    found = _loader_runners(index)
    _add_callees(index, found)
    return found


def loader_run_function_of(index: ModuleIndex, node: cst.CSTNode) -> str | None:
    """What runs ``node`` per sample or batch, if a data loader does."""
    return _enclosing(index, node, loader_run_functions(index))


def training_caller(index: ModuleIndex, node: cst.CSTNode) -> cst.Call | None:
    """A call outside the code a data loader runs (the training loop's
    ``store.put("model.pt", model.state_dict())``) that also runs the per-sample
    function ``node`` is in (``Store.put``, which a Dataset's ``__getitem__``
    calls), itself or through the local functions it calls; None if none."""
    runs = loader_run_functions(index)
    function = next(
        (a for a in index.ancestors(node) if isinstance(a, cst.FunctionDef)), None
    )
    if function is None or function not in runs:
        return None
    return _outside_callers(index).get(function)


@lru_cache(maxsize=8)
def _outside_callers(index: ModuleIndex) -> dict[Runner, cst.Call]:
    """Each function a data loader runs that a call outside those functions runs
    too (directly or through the local functions it calls) -> that call, the
    first in source order."""
    runs = loader_run_functions(index)
    found: dict[Runner, cst.Call] = {}
    if not runs:
        return found
    for call in index.calls:
        if _enclosing(index, call, runs) is not None:
            continue  # run per sample itself
        todo = [c for c, _ in _callees(index, call) if c in runs]
        while todo:
            function = todo.pop(0)
            if function in found:
                continue
            found[function] = call
            for inner in findall(function.body, m.Call()):
                todo += [
                    c
                    for c, _ in _callees(index, inner)  # type: ignore[arg-type]
                    if c in runs and c not in found
                ]
    return found


def _loader_runners(index: ModuleIndex) -> dict[Runner, str]:
    """A Dataset's methods and a ``collate_fn`` of the file's loaders."""
    found: dict[Runner, str] = {}
    loaders = _loader_calls(index)
    if not loaders:
        return found
    datasets = set(index.local_subclasses(DATASET_BASES))
    for call in loaders:
        for arg in call.args:
            if (arg.keyword is None and arg is call.args[0]) or _keyword(
                arg, "dataset"
            ):
                datasets |= dataset_classes(index, arg.value)
            if _keyword(arg, "collate_fn"):
                runner = _runner(index, arg.value)
                if runner is not None:
                    found[runner] = (
                        "the `collate_fn` that the data loader runs for each batch"
                    )
    # in source order (a set of nodes iterates by address: a helper two datasets
    # call would be named from either, run to run)
    for cls in _in_source_order(index, datasets):
        for name in _DATASET_METHODS:
            method = _method(cls, name)
            if method is not None:
                found[method] = (
                    f"`{cls.name.value}.{name}`, which the data loader runs for "
                    "each sample"
                )
    return found


def dataset_classes(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0
) -> set[cst.ClassDef]:
    """The local classes whose instance the dataset ``expr`` may be or wrap: an
    instance of the class, or one handed to ``Subset``, ``ConcatDataset``,
    ``random_split`` (``train, val = random_split(ds, [n, m])``; ``splits[0]``)."""
    if depth > _DEPTH:
        return set()
    if isinstance(expr, cst.Subscript):  # random_split(...)[0], splits[0]
        return dataset_classes(index, expr.value, depth + 1)
    if isinstance(expr, (cst.List, cst.Tuple)):  # ConcatDataset(parts), parts = [...]
        found: set[cst.ClassDef] = set()
        for element in expr.elements:
            found |= dataset_classes(index, element.value, depth + 1)
        return found

    def built(call: cst.Call) -> set[cst.ClassDef] | None:
        cls = index.local_class(call.func)
        if cls is not None:
            return {cls}
        how = next(
            (_WRAPPERS[q] for q in index.qualnames(call.func) if q in _WRAPPERS), None
        )
        if how is None:
            return None
        found: set[cst.ClassDef] = set()
        for value in _wrapped(call, how):
            found |= dataset_classes(index, value, depth + 1)
        return found

    found = held_instances(index, expr, built, depth)
    key = index.key(expr)
    for value in index.values.get(key, []) if key is not None else []:
        if isinstance(value, (cst.List, cst.Tuple)):
            found |= dataset_classes(index, value, depth + 1)
    for value, _, _ in index.unpacked.get(key, []) if key is not None else []:
        found |= dataset_classes(index, value, depth + 1)  # a, b = random_split(...)
    return found


#: How far a dataset is followed through wrappers and variables.
_DEPTH = 8


def _wrapped(call: cst.Call, how: str) -> list[cst.BaseExpression]:
    """The datasets a wrapper's call takes (``how``: see ``_WRAPPERS``)."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    keyword = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if how == "all":
        return positional + list(keyword.values())
    first = (
        positional[0] if positional else keyword.get("dataset", keyword.get("datasets"))
    )
    if first is None:
        return []
    if how == "list" and isinstance(first, (cst.List, cst.Tuple)):
        return [e.value for e in first.elements if isinstance(e, cst.Element)]
    return [first]


def _in_source_order(
    index: ModuleIndex, classes: set[cst.ClassDef]
) -> list[cst.ClassDef]:
    known = {cls: n for n, cls in enumerate(index.classes)}
    return sorted(classes, key=lambda c: (known.get(c, len(known)), c.name.value))


def _add_callees(index: ModuleIndex, found: dict[Runner, str]) -> None:
    """Add the local functions and methods the found ones call: ``self.`` methods
    and those of other local objects (``self.cache.put(i, feat)``)."""
    todo = list(found)
    while todo:
        runner = todo.pop(0)  # first found first: a shared helper is named from it
        callees = [
            pair
            for call in findall(runner.body, m.Call())
            for pair in _callees(index, call)  # type: ignore[arg-type]
        ]
        for item in findall(runner.body, m.Subscript()):
            # `return self.base[i]` of a wrapper Dataset: the held object's
            # __getitem__ (a duck-typed dataset handed to the wrapper)
            for cls in _in_source_order(
                index, instance_classes(index, item.value)  # type: ignore[attr-defined]
            ):
                method = _method(cls, "__getitem__")
                if method is not None:
                    callees.append((method, f"{cls.name.value}.__getitem__"))
        for callee, name in callees:
            if callee not in found:
                found[callee] = f"`{name}`, called from {found[runner]}"
                todo.append(callee)


def _callees(index: ModuleIndex, call: cst.Call) -> list[tuple[cst.FunctionDef, str]]:
    """The local functions ``call`` may run, each with its name for a message: a
    function or ``self.`` method (its own name), or the method of a local object
    an attribute holds (``self.cache.put`` -> ``FeatureCache.put``)."""
    callee = index.local_function(call.func)
    if callee is not None:
        return [(callee, callee.name.value)]
    func = call.func
    methods = []
    # `self.transform(sample)` of a Dataset handed a local transform object
    # (DINO's DataAugmentationDINO): the held object's __call__
    for cls in _in_source_order(index, instance_classes(index, func)):
        method = _method(cls, "__call__")
        if method is not None:
            methods.append((method, f"{cls.name.value}.__call__"))
    if not isinstance(func, cst.Attribute):
        return methods
    for cls in _in_source_order(index, instance_classes(index, func.value)):
        method = _method(cls, func.attr.value)
        if method is not None:
            methods.append((method, f"{cls.name.value}.{func.attr.value}"))
    return methods


def _loader_generator(index: ModuleIndex, function: cst.FunctionDef) -> bool:
    """Is ``function`` a generator that loops over a data loader and is called
    here (``def infinite(loader): while True: for b in loader: yield ...``)?"""
    if not findall(function.body, m.Yield()) or not index.call_sites(function):
        return False
    return any(
        isinstance(loop, cst.For) and index.loader_loop(loop.iter)[0]
        for loop in findall(function.body, m.For())
    )


def _keyword(arg: cst.Arg, name: str) -> bool:
    return arg.keyword is not None and arg.keyword.value == name


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def _runner(index: ModuleIndex, expr: cst.BaseExpression) -> Runner | None:
    if isinstance(expr, cst.Lambda):
        return expr
    return index.local_function(expr)


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    if not isinstance(cls.body, cst.IndentedBlock):
        return None
    for statement in cls.body.body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def data_function_of(index: ModuleIndex, node: cst.CSTNode) -> str | None:
    """What runs the data function ``node`` is in (a phrase), if it is in one."""
    return _enclosing(index, node, data_functions(index))


def _enclosing(
    index: ModuleIndex, node: cst.CSTNode, functions: dict[Runner, str]
) -> str | None:
    if not functions:
        return None
    for ancestor in index.ancestors(node):
        if (
            isinstance(ancestor, (cst.FunctionDef, cst.Lambda))
            and ancestor in functions
        ):
            return functions[ancestor]
    return None
