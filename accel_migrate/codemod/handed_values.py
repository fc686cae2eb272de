"""What a trainer class's ``__init__`` stores of what it is handed
(``library_trainers``): ``self.model = model``, ``self.model = model.to(device)``,
or sthalles/SimCLR's ``self.model = kwargs["model"].to(self.args.device)`` of a
``**kwargs`` (the keyword's name is then the parameter's). Static only: ``ast``."""

from __future__ import annotations

import ast

#: Methods that return their receiver, or the same module moved or cast.
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train"})


def handed_value(value: ast.expr, names: set[str], kwargs: str | None) -> str | None:
    """The ``__init__`` parameter ``value`` is: ``model``, ``model.to(device)``,
    or sthalles/SimCLR's ``kwargs["model"].to(self.args.device)`` of a
    ``**kwargs`` (the keyword's name); None for anything else."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in _SAME_MODULE
    ):
        value = value.func.value
    if isinstance(value, ast.Name):
        return value.id if value.id in names else None
    if (
        kwargs is not None
        and isinstance(value, ast.Subscript)
        and isinstance(value.value, ast.Name)
        and value.value.id == kwargs
        and isinstance(value.slice, ast.Constant)
        and isinstance(value.slice.value, str)
    ):
        return value.slice.value
    return None
