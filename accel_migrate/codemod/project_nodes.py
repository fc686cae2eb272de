"""The nodes of a function's own body (not of the functions or classes defined
in it), and what it assigns a name there: read by the project view's facts
(``project_helpers``) and the modules that read local functions with it."""

from __future__ import annotations

import ast
from collections.abc import Iterable


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of ``function``'s body, not of functions or classes in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            stack.extend(ast.iter_child_nodes(node))


def _assigned_in(function: ast.AST, name: str) -> list[ast.expr]:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    values = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values.append(node.value)
    return values
