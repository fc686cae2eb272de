"""A model class whose ``forward`` is not implemented: it runs through other methods.

ikostrikov's PPO ``Policy`` raises ``NotImplementedError`` in ``forward`` and is
run through ``act``, ``get_value`` and ``evaluate_actions``. Read from a class
of the file being migrated and from a class of another module of the project
(``HelperFact.unimplemented_forward``), as a phrase for AM042. ``ast`` only:
the project view runs without libcst. Only the class's
own ``forward`` counts: an abstract base whose subclasses implement it is not
one.
"""

from __future__ import annotations

import ast

_NOT_IMPLEMENTED = frozenset({"NotImplementedError", "NotImplemented"})
_DECORATORS = frozenset({"property", "staticmethod", "classmethod"})


def _raises_only(body: list[ast.stmt]) -> bool:
    """The body (besides a docstring or ``pass``) is one ``raise
    NotImplementedError``."""
    statements = [
        s
        for s in body
        if not isinstance(s, ast.Pass)
        and not (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Constant)
            and isinstance(s.value.value, str)
        )
    ]
    if len(statements) != 1 or not isinstance(statements[0], ast.Raise):
        return False
    raised = statements[0].exc
    if isinstance(raised, ast.Call):
        raised = raised.func
    return isinstance(raised, ast.Name) and raised.id in _NOT_IMPLEMENTED


def _public_methods(cls: ast.ClassDef) -> list[str]:
    return [
        s.name
        for s in cls.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not s.name.startswith("_")
        and s.name != "forward"
        and not any(
            isinstance(d, ast.Name) and d.id in _DECORATORS for d in s.decorator_list
        )
    ]


def unimplemented_forward(cls: ast.ClassDef, where: str = "") -> str:
    """``"`Policy.forward` raises NotImplementedError (model.py, line 23), and
    the class is run through `act`, `evaluate_actions`"``; "" for a class whose
    own ``forward`` is implemented, or that has none of its own. ``where``: the
    class's file, named with the line (none for the file being migrated)."""
    for statement in cls.body:
        if (
            isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
            and statement.name == "forward"
            and _raises_only(statement.body)
        ):
            methods = ", ".join(f"`{name}`" for name in _public_methods(cls))
            place = f" ({where}, line {statement.lineno})" if where else ""
            through = f", and the class is run through {methods}" if methods else ""
            return f"`{cls.name}.forward` raises NotImplementedError{place}{through}"
    return ""
