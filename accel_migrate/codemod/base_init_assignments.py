"""``self.<attr> = self.<method>(...)`` in a class's ``__init__``, read with
``ast`` for the project view (``HelperFact.init_built``): the part of
``base_built_models`` that a run answered by the cache imports, so it imports
neither libcst nor the rules.
"""

from __future__ import annotations

import ast

#: Methods that hand back the module they are called on.
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train"})
_CODE = 70


def init_built(cls: ast.ClassDef) -> tuple[tuple[str, str, int, str], ...]:
    """(attribute, method, line, code) for each ``self.<attr> =
    self.<method>(...)`` of ``cls``'s own ``__init__``."""
    found = []
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef) and statement.name == "__init__":
            for node in ast.walk(statement):
                built = _built_by_method(node)
                if built is not None:
                    attribute, method, code = built
                    found.append((attribute, method, node.lineno, code))  # type: ignore[attr-defined]
    return tuple(found)


def _built_by_method(node: ast.AST) -> tuple[str, str, str] | None:
    """(attribute, method, code) of ``self.<attr> = self.<method>(...)``."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    target = node.targets[0]
    if not (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return None
    method = _own_method(node.value)
    if not method:
        return None
    code = ast.unparse(node)
    if len(code) > _CODE:
        code = code[: _CODE - 3] + "..."
    return target.attr, method, code


def _own_method(value: ast.expr) -> str:
    """``m`` of ``self.m(...)``, also under ``.to(device)`` and the like."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _SAME_MODULE
        and not (
            isinstance(value.func.value, ast.Name) and value.func.value.id == "self"
        )
    ):
        value = value.func.value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == "self"
    ):
        return value.func.attr
    return ""
