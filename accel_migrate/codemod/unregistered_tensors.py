"""A model class that keeps a tensor with a gradient of its own that is not a parameter.

DARTS's search network holds its architecture weights as
``self.alphas_normal = Variable(1e-3 * torch.randn(k, n), requires_grad=True)``
(or ``(...).requires_grad_(True)``) and hands them out through
``arch_parameters()`` to an optimizer of their own. They are attributes of the
module but not registered ``nn.Parameter``s: ``model.parameters()`` does not
list them, and so neither does DDP or FSDP. Read from a class of the file being
migrated and from a class of another module of the project
(``HelperFact.unregistered_tensors``), as a phrase for AM045. ``ast`` only: the
project view runs without libcst.
"""

from __future__ import annotations

import ast

from .project_nodes import self_attribute

_PARAMETERS = frozenset({"Parameter"})
_VARIABLES = frozenset({"Variable"})


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _false(call: ast.Call) -> bool:
    values = [*call.args, *(k.value for k in call.keywords)]
    return any(isinstance(v, ast.Constant) and v.value is False for v in values)


def _requires_grad_kw(call: ast.Call) -> bool:
    return any(
        k.arg == "requires_grad"
        and isinstance(k.value, ast.Constant)
        and k.value.value is True
        for k in call.keywords
    )


def _learnt_tensor(value: ast.expr) -> bool:
    """A new tensor with a gradient of its own that is not an ``nn.Parameter``:
    ``torch.zeros(3, requires_grad=True)``, ``Variable(t, requires_grad=True)``,
    ``(1e-3 * torch.randn(k, n)).requires_grad_(True)`` (through ``.cuda()``,
    ``.to(...)``)."""
    while isinstance(value, ast.Call):
        name = _name(value.func)
        if name in _PARAMETERS:
            return False
        if name == "requires_grad_":
            return not _false(value)
        if _requires_grad_kw(value):
            dotted = value.func
            while isinstance(dotted, ast.Attribute):
                dotted = dotted.value
            return name in _VARIABLES or (
                isinstance(dotted, ast.Name) and dotted.id == "torch"
            )
        if not isinstance(value.func, ast.Attribute):
            return False
        value = value.func.value
    return False


def unregistered_tensors(cls: ast.ClassDef, where: str = "", offset: int = 0) -> str:
    """``"`Network._initialize_alphas` sets `self.alphas_normal` to a tensor
    with a gradient of its own that is not an nn.Parameter (model_search.py,
    line 95)"``; "" for a class with none. ``where``: the class's file, named
    with the line (none for the file being migrated); ``offset``: added to the
    line, for a class parsed on its own."""
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(method):
            if not isinstance(node, ast.Assign) or not _learnt_tensor(node.value):
                continue
            for target in node.targets:
                attribute = self_attribute(target)
                if attribute is not None:
                    place = f"{where}, line" if where else "line"
                    return (
                        f"`{cls.name}.{method.name}` sets `self.{attribute}` to a "
                        "tensor with a gradient of its own that is not an "
                        f"nn.Parameter ({place} {node.lineno + offset})"
                    )
    return ""
