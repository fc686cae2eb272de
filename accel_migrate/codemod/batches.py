"""What a loop over a prepared (sharded) data loader draws, and the loader's batch size.

Shared by the rules about per-process batches (AM025 batch-size shapes, AM026
sample counters): which ``DataLoader(...)`` calls a ``for`` loop provably steps
through, each wrapped in ``accel.prepare_dataloader``; the variables its target
binds (the batch, and an ``enumerate`` counter); and the batch size each loader was
configured with, as the expressions the script spells it with.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .analysis import Key, ModuleIndex, attr_chain
from .names import DATALOADER_CALLS
from .patterns import self_attribute, string_value
from .scopes import FunctionScope

_MAX_DEPTH = 6


@dataclass(frozen=True)
class LoaderLoop:
    #: The ``DataLoader(...)`` calls the loop may step through (all prepared).
    loaders: tuple[cst.Call, ...]
    #: The ``enumerate`` counter's variable, if the loop has one.
    counter: Key | None
    #: The variables the loop binds to (parts of) the batch.
    batch: frozenset[Key]


def loader_loop(index: ModuleIndex, loop: cst.For) -> LoaderLoop | None:
    """``loop`` steps through prepared loaders only, and they are all known."""
    loaders = _prepared(index, loop.iter, 0)
    if not loaders:
        return None
    return bound(index, loop, tuple(loaders))


def bound(
    index: ModuleIndex, loop: cst.For, loaders: tuple[cst.Call, ...]
) -> LoaderLoop | None:
    """What ``loop``'s target binds, over ``loaders``: the ``enumerate`` counter
    and the batch's variables; None for an ``enumerate`` target of another shape."""
    target = loop.target
    counter = None
    if index.loader_loop(loop.iter)[1]:  # enumerate(loader): (i, batch)
        if not (isinstance(target, cst.Tuple) and len(target.elements) == 2):
            return None
        first, target = target.elements[0].value, target.elements[1].value
        counter = index.key(first) if isinstance(first, cst.Name) else None
    return LoaderLoop(loaders, counter, frozenset(_names(index, target)))


def _names(index: ModuleIndex, target: cst.BaseExpression) -> list[Key]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [k for e in target.elements for k in _names(index, e.value)]
    key = index.key(target) if isinstance(target, cst.Name) else None
    return [key] if key is not None else []


def _prepared(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int
) -> list[cst.Call] | None:
    """The DataLoader calls ``expr`` may be, each inside a prepare_dataloader call;
    None when any value it may have is something else or unknown."""
    if depth > _MAX_DEPTH:
        return None
    inner = index._loop_wrapped(expr)  # enumerate(...), tqdm(...)
    if inner is not None and not index.is_runtime_call(expr, "prepare_dataloader"):
        return _prepared(index, inner, depth + 1)
    if index.is_runtime_call(expr, "prepare_dataloader"):
        args = expr.args  # type: ignore[attr-defined]
        built = args[0].value if args and args[0].keyword is None else None
        if isinstance(built, cst.Call) and index.qualnames(built.func) & (
            DATALOADER_CALLS
        ):
            return [built]
        return None
    # a name, or `self.data_loader`: a loader a class keeps (its assignments are read)
    if not isinstance(expr, cst.Name) and not self_attribute(expr):
        return None
    values = _values(index, expr)  # type: ignore[arg-type]
    if not values:
        return None
    found: list[cst.Call] = []
    for value in values:
        calls = _prepared(index, value, depth + 1) if value is not None else None
        if calls is None:
            return None
        found += calls
    return found


def _values(
    index: ModuleIndex, name: cst.Name | cst.Attribute
) -> list[cst.BaseExpression | None] | None:
    """What ``name`` may hold: its assignments (also of an attribute of
    ``self``), or, for a parameter of a local function, what every call of it
    passes."""
    key = index.key(name)
    if key is None:
        return None
    scope = key[0]
    if (
        isinstance(name, cst.Name)
        and isinstance(scope, FunctionScope)
        and isinstance(scope.node, cst.FunctionDef)
    ):
        function = scope.node
        if index.function_scope_key(function, name.value) == key:
            sites = index.call_sites(function)
            passed: list[cst.BaseExpression | None] = []
            for site in sites:
                args = [a for k, a in index.arguments(site) if k == key]
                if len(args) != 1:
                    return None
                passed.append(args[0])
            return passed or None
    return list(index.values.get(key, ())) or None


def batch_size_of(index: ModuleIndex, loader: cst.Call) -> cst.BaseExpression | None:
    """The expression a ``DataLoader(...)`` call takes its batch size from:
    ``batch_size=``, the second positional argument, or ``**kwargs`` built from a
    dict display with a ``"batch_size"`` key."""
    for position, arg in enumerate(loader.args):
        if arg.keyword is not None and arg.keyword.value == "batch_size":
            return arg.value
        if arg.keyword is None and not arg.star and position == 1:
            return arg.value
        if arg.star == "**":
            found = _dict_entry(index, arg.value, "batch_size")
            if found is not None:
                return found
    return None


def _dict_entry(
    index: ModuleIndex, expr: cst.BaseExpression, wanted: str
) -> cst.BaseExpression | None:
    values = [expr]
    if isinstance(expr, cst.Name):
        values = [v for v in _values(index, expr) or () if v is not None]
    for value in values:
        if isinstance(value, cst.Dict):
            for element in value.elements:
                if (
                    isinstance(element, cst.DictElement)
                    and string_value(element.key) == wanted
                ):
                    return element.value
    return None


def same_variable(
    index: ModuleIndex, a: cst.BaseExpression, b: cst.BaseExpression, strict: bool
) -> bool:
    """Do ``a`` and ``b`` name one variable (``batch_size``) or attribute
    (``args.batch_size``)? ``strict``: the attribute's object is also provably
    the same variable; otherwise the spelling decides (``args.batch_size`` in
    ``train(args)`` and in ``main()``)."""
    if isinstance(a, cst.Name) and isinstance(b, cst.Name):
        return a.value == b.value and index.key(a) == index.key(b) is not None
    if isinstance(a, cst.Attribute) and isinstance(b, cst.Attribute):
        chain = attr_chain(a)
        if chain is None or chain != attr_chain(b):
            return False
        if not strict:
            return True
        root_a, root_b = _root(a), _root(b)
        return index.key(root_a) == index.key(root_b) is not None
    return False


def _root(node: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(node, cst.Attribute):
        node = node.value
    return node


#: What a name may hold (its assignments, or what every call passes for a
#: parameter), for other modules' use.
possible_values = _values
