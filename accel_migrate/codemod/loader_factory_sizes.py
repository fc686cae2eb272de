"""The batch size of a loader a factory of another module builds, known through
the factory's parameter.

ProGAN's ``data = get_data_loader(dataset, current_batch_size, num_workers)``,
with ``def get_data_loader(dataset, batch_size, num_workers): return
DataLoader(dataset, batch_size=batch_size, ...)`` in ``data_tools.py``: the loader
is configured with whatever the call hands ``batch_size``, so
``torch.randn(current_batch_size, z_dim)`` in the loop over it is a whole-batch
sized tensor (AM025), as it would be with the ``DataLoader`` built in place.

``batch_size_parameter`` reads the factory (Python ``ast``, for its
``HelperFact.loader_batch_size``); ``factory_batch_size`` finds the argument a
call hands that parameter. libcst is imported where it is used: the project
facts import this module on the cache-hit path, which stays free of libcst.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from .names import DATALOADER_CALLS

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import ModuleIndex
    from .batches import LoaderLoop


def batch_size_parameter(
    function: ast.FunctionDef | ast.AsyncFunctionDef, dotted: Callable[[ast.expr], str]
) -> tuple[str, int]:
    """(name, position among the positional parameters, -1 keyword only) of the
    parameter every ``DataLoader`` the function returns takes its batch size from
    (``return DataLoader(ds, batch_size=batch_size)``, or a name bound once to
    such a call and returned; also each item of a returned tuple of them);
    ("", -1) where there is none or they differ."""
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    if not returns:
        return "", -1
    found: set[str] = set()
    for ret in returns:
        # `return train_loader, valid_loader, test_loader` (the Udacity
        # notebooks' split): every loader of the tuple, each with that size
        values = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
        for value in values:
            loader = _loader_call(function, value, dotted)
            size = _size_argument(loader) if loader is not None else None
            if not isinstance(size, ast.Name):
                return "", -1
            found.add(size.id)
    if len(found) != 1:
        return "", -1
    name = found.pop()
    if _assigned_in_body(function, name):
        return "", -1  # `batch_size = batch_size // 2` first
    positional = [*function.args.posonlyargs, *function.args.args]
    for position, arg in enumerate(positional):
        if arg.arg == name:
            return name, position
    if any(arg.arg == name for arg in function.args.kwonlyargs):
        return name, -1
    return "", -1


def _loader_call(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    value: ast.expr | None,
    dotted: Callable[[ast.expr], str],
) -> ast.Call | None:
    if isinstance(value, ast.Name):
        bound = [
            node.value
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == value.id for t in node.targets)
        ]
        if len(bound) != 1:
            return None
        value = bound[0]
    if isinstance(value, ast.Call) and dotted(value.func) in DATALOADER_CALLS:
        return value
    return None


def _size_argument(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "batch_size":
            return keyword.value
        if keyword.arg is None:
            return None  # **kwargs: not read here
    if len(call.args) > 1 and not any(isinstance(a, ast.Starred) for a in call.args):
        return call.args[1]
    return None


def _assigned_in_body(
    function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> bool:
    return any(
        isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        and any(
            isinstance(t, ast.Name) and t.id == name
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
        for node in ast.walk(function)
    )


def factory_batch_size(index: ModuleIndex, call: cst.Call) -> cst.BaseExpression | None:
    """The argument ``call`` (of a loader factory of another module of the batch,
    or of one returning a tuple of loaders) hands the parameter its loaders take
    their batch size from; None where that is not known."""
    fact = index.helper(call.func, "loader") or index.helper(call.func)
    if fact is None or not fact.loader_batch_size[0]:
        return None
    name, position = fact.loader_batch_size
    for at, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
        if arg.keyword is None and at == position:
            return arg.value
    return None


def factory_loader_loop(index: ModuleIndex, loop: cst.For) -> LoaderLoop | None:
    """``for i, batch in enumerate(data)`` where every value of ``data`` is
    ``accel.prepare_dataloader(get_loader(...))`` of a factory whose batch size
    is known (``factory_batch_size``), or an item of ``train_loader, valid_loader
    = map(accel.prepare_dataloader, make_loaders(...))`` of such a factory that
    returns a tuple of loaders: a loop over prepared loaders, with no
    ``DataLoader`` call of this file to read (``LoaderLoop.loaders`` empty)."""
    import libcst as cst

    from .batches import _values, bound

    expr: cst.BaseExpression = loop.iter
    for _ in range(3):
        inner = index._loop_wrapped(expr)  # enumerate(...), tqdm(...)
        if inner is None:
            break
        expr = inner
    if not isinstance(expr, cst.Name):
        return None
    if _mapped_factory(index, expr):
        return bound(index, loop, ())
    values = _values(index, expr)
    if not values or not all(
        isinstance(value, cst.Call)
        and index.is_runtime_call(value, "prepare_dataloader")
        and value.args
        and isinstance(value.args[0].value, cst.Call)
        and factory_batch_size(index, value.args[0].value) is not None
        for value in values
    ):
        return None
    return bound(index, loop, ())


def _mapped_factory(index: ModuleIndex, name: cst.Name) -> bool:
    """Is every binding of ``name`` an item of a tuple target assigned
    ``map(accel.prepare_dataloader, factory(...))``, of a factory whose batch
    size is known?"""
    import libcst as cst

    from .patterns import prepared_loader_map

    scope = index._scopes.get(name)
    if scope is None:
        return False
    bindings = list(scope[name.value])
    if not bindings:
        return False
    for binding in bindings:
        # the target's Name -> Element -> Tuple -> AssignTarget -> Assign
        node = binding.node
        chain = [node]
        for _ in range(4):
            chain.append(index.parent(chain[-1]) if chain[-1] is not None else None)
        _, element, target, holder, node = chain
        if not (
            isinstance(element, cst.Element)
            and isinstance(target, (cst.Tuple, cst.List))
            and isinstance(holder, cst.AssignTarget)
            and isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and prepared_loader_map(index, node.value)
        ):
            return False
        inner = node.value.args[1].value  # type: ignore[attr-defined]
        if not isinstance(inner, cst.Call) or factory_batch_size(index, inner) is None:
            return False
    return True
