"""Why an item of a returned tuple of loaders has no kind AM006 knows
(``HelperFact.item_reasons``): ``return DataLoader(train_set, ...), train_set``
with ``train_set`` a parameter of the function hands back whatever its caller
gave, which the project view does not classify. AM006 prepares the loaders of
such a tuple only where every other item is surely no loader (None, a number, a
dataset); otherwise the file is left whole, and the finding names each item it
could not classify and why, instead of "a tuple of other values". Static only:
``ast``."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .reaching_values import reaching_value

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

_SHOWN = 60
_KINDS = {
    "loader": "a DataLoader",
    "dataset": "a dataset",
    "none": "None",
    "number": "a number",
    "": "a value of unknown kind",
}


def item_reasons(
    facts: HelperFacts,
    returns: list[ast.Return],
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    items: tuple[str, ...],
) -> tuple[str, ...]:
    """One phrase for each item of the returned tuples whose kind is not known
    (``items``' ""), in order; () where the returns are not tuples of that
    length."""
    values = [r.value for r in returns]
    if not values or not all(
        isinstance(v, ast.Tuple) and len(v.elts) == len(items) for v in values
    ):
        return ()
    found = []
    for position, kind in enumerate(items):
        if kind:
            continue
        elements = [v.elts[position] for v in values]  # type: ignore[union-attr]
        kinds = [facts._item_kind(e, function)[0] for e in elements]
        ordinal = f"item {position + 1}"
        if len(set(kinds)) > 1:
            shown = ", ".join(
                f"{_KINDS.get(k, 'a ' + k)} in `return {_code(v)}`"
                for k, v in zip(kinds, values, strict=True)
            )
            found.append(f"{ordinal} is {shown}: not one kind in every return")
            continue
        found.append(f"{ordinal}, {_unknown(elements[0], function)}")
    return tuple(found)


def _unknown(expr: ast.expr, function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    if isinstance(expr, ast.Name):
        if expr.id in _parameters(function):
            return (
                f"`{expr.id}`, is a parameter of `{function.name}` handed back as "
                "its caller gave it: whether it is a loader depends on each call, "
                "which the analysis does not follow into the returned tuple"
            )
        value = reaching_value(function, expr)
        if value is not None:
            return (
                f"`{expr.id}` (`{_code(value)}`), is not a DataLoader, a dataset, a "
                "number or None that the analysis recognises"
            )
        return (
            f"`{expr.id}`, is bound in more than one way in `{function.name}`, so "
            "its kind is not known"
        )
    return (
        f"`{_code(expr)}`, is not a DataLoader, a dataset, a number or None that "
        "the analysis recognises"
    )


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = function.args
    found = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    found += [a for a in (args.vararg, args.kwarg) if a is not None]
    return {a.arg for a in found}


def _code(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
