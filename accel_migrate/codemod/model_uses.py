"""What a function does with a value it is handed as a model: runs it (``model(x)``),
or calls a model's own method on it (``model.train()``, ``model.parameters()``),
directly or through a local bound to it; and the ``.backward()`` calls of its own
body. Shared by the trainer finders (``library_trainers``, ``function_trainers``,
``closure_steps``). Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator

from .project_nodes import _own_nodes

#: Methods that show a value is used as a model (not ``zero_grad``: an optimizer
#: has one too).
_MODEL_METHODS = frozenset(
    {"train", "parameters", "named_parameters", "configure_optimizers"}
)


def _used_value_as_model(
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    handed: Callable[[ast.expr], str | None],
) -> str | None:
    """What ``method`` uses as a model among the values ``handed`` names,
    directly or through a local bound to one."""
    aliases: dict[str, str] = {}
    for node in _own_nodes(method):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name, value in _pairs(target, node.value):
                    found = handed(value)
                    if found is not None:
                        aliases[name] = found

    def stored(expr: ast.expr) -> str | None:
        found = handed(expr)
        if found is not None:
            return found
        if isinstance(expr, ast.Name):
            return aliases.get(expr.id)
        return None

    # In the order they return (`self.model(x)` before the `self.criterion(...)`
    # it is an argument of). A model's own methods say it best
    # (`self.model.train()`); a stored value that is only called may be the loss
    # function (`self.criterion(out, y)`).
    calls = sorted(
        (n for n in _own_nodes(method) if isinstance(n, ast.Call)),
        key=lambda n: (n.end_lineno or n.lineno, n.end_col_offset or n.col_offset),
    )
    for node in calls:
        if isinstance(node.func, ast.Attribute) and node.func.attr in _MODEL_METHODS:
            receiver = stored(node.func.value)
            if receiver is not None:
                return receiver
    for node in calls:
        called = stored(node.func)
        if called is not None:
            return called
    return None


def _pairs(target: ast.expr, value: ast.expr) -> Iterable[tuple[str, ast.expr]]:
    """(name, value) for ``a = v`` and element-wise ``a, b = v, w``."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
    ):
        for inner, item in zip(target.elts, value.elts, strict=True):
            yield from _pairs(inner, item)


def _backward_calls(function: ast.AST) -> Iterator[ast.Call]:
    """The ``x.backward(...)`` calls of ``function``'s own body."""
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "backward"
        ):
            yield node
