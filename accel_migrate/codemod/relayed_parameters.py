"""Parameters a local function hands back unchanged in the tuple it returns
(DKT's ``def train(loaders, model, optimizer, lossFunc): ... return model,
optimizer``): a project fact, so that ``model, optimizer = eval.train(..., model,
...)`` in a caller is known to rebind the caller's own model, not a new one.
Static only: ``ast``."""

from __future__ import annotations

import ast
from collections.abc import Mapping

from .project_nodes import _own_nodes

Functions = Mapping[str, "ast.FunctionDef | ast.AsyncFunctionDef"]
_DEPTH = 4
#: No parameter is relayed at this tuple position.
NOT_RELAYED: tuple[int, str] = (-1, "")


def relayed_parameters(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    returns: list[ast.Return],
    functions: Functions,
    depth: int = 0,
) -> tuple[tuple[int, str], ...]:
    """For each position of the tuple every ``return`` of ``function`` builds:
    (the positional index, the name) of the parameter returned there unchanged,
    or ``NOT_RELAYED``; () where the returns are not all tuples of one length.

    A parameter counts only where no statement of the function (nested ones
    included) binds or deletes its name again, so the returned object is the one
    the caller handed in; ``x, opt = step(x, opt)`` does not count where the
    module's function ``step`` (of ``functions``) relays its parameter there."""
    values = [r.value for r in returns]
    if not values or not all(
        isinstance(v, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in v.elts)
        for v in values
    ):
        return ()
    lengths = {len(v.elts) for v in values}  # type: ignore[union-attr]
    if len(lengths) != 1:
        return ()
    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    named = set(positional) | {a.arg for a in function.args.kwonlyargs}
    rebound = _rebound_names(function, functions, depth)
    found = []
    for position in range(lengths.pop()):
        items = {
            (
                v.elts[position].id  # type: ignore[union-attr]
                if isinstance(v.elts[position], ast.Name)  # type: ignore[union-attr]
                else None
            )
            for v in values
        }
        name = items.pop() if len(items) == 1 else None
        if name is None or name not in named or name in rebound:
            found.append(NOT_RELAYED)
        else:
            found.append((positional.index(name) if name in positional else -1, name))
    return tuple(found)


def returned_parameter(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    returns: list[ast.Return],
    functions: Functions,
) -> tuple[int, str]:
    """(the positional index, the name) of the parameter every ``return`` of
    ``function`` hands back unchanged, alone (pytorch-adda's ``init_model(net,
    restore)``: loads weights into ``net``, moves it, ``return net``), or
    ``NOT_RELAYED``: the call's value is the object the caller handed in."""
    names = {r.value.id if isinstance(r.value, ast.Name) else None for r in returns}
    name = names.pop() if len(names) == 1 else None
    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    named = set(positional) | {a.arg for a in function.args.kwonlyargs}
    if not returns or name is None or name not in named:
        return NOT_RELAYED
    if name in _rebound_names(function, functions, 0):
        return NOT_RELAYED
    return (positional.index(name) if name in positional else -1, name)


def _rebound_names(function: ast.AST, functions: Functions, depth: int) -> set[str]:
    """Names the function's body binds or deletes anywhere, or declares
    ``global``/``nonlocal`` (then another scope may rebind them)."""
    names: set[str] = set()
    kept = _relaying_targets(function, functions, depth)
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            if id(node) in kept:
                continue
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node is not function:
                names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchAs) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchStar,)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def _relaying_targets(function: ast.AST, functions: Functions, depth: int) -> set[int]:
    """ids of the ``Name`` targets of ``a, b = f(..., a, ...)`` statements where
    the module's function ``f`` hands back, at a's position, the very parameter
    it was given ``a`` for: such a binding keeps the object."""
    kept: set[int] = set()
    if depth >= _DEPTH:
        return kept
    for node in ast.walk(function):
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id in functions
            and functions[node.value.func.id] is not function
            and not any(isinstance(a, ast.Starred) for a in node.value.args)
        ):
            continue
        callee = functions[node.value.func.id]
        returns = [n for n in _own_nodes(callee) if isinstance(n, ast.Return)]
        relayed = relayed_parameters(callee, returns, functions, depth + 1)
        targets = node.targets[0].elts
        if len(relayed) != len(targets):
            continue
        call = node.value
        for target, (index, name) in zip(targets, relayed, strict=True):
            if not isinstance(target, ast.Name) or not name:
                continue
            given = next(
                (k.value for k in call.keywords if k.arg == name),
                call.args[index] if 0 <= index < len(call.args) else None,
            )
            if isinstance(given, ast.Name) and given.id == target.id:
                kept.add(id(target))
    return kept
