"""Optimizers over the parameter groups a model's own method hands back
(``HelperFact.param_group_methods``): yjxiong/tsn-pytorch's main.py builds
``policies = model.get_optim_policies()`` (models.py's TSN walks
``self.modules()`` and returns a list of ``{"params": [...], "lr_mult": ...}``
dicts of its own parameters), wraps the model in DataParallel, and trains it
with ``torch.optim.SGD(policies, lr, ...)``. That optimizer is over the
model's parameters: AM004 prepares the model, as it does one whose
``model.parameters()`` reach the optimizer (``optimized_models``).

A method counts when it takes nothing but ``self``, returns a value on every
path, and every ``.parameters()`` / ``.named_parameters()`` it reads is of
``self``, a part of ``self`` (``self.fc``), or a loop variable over
``self.modules()`` / ``self.children()`` (or their named forms): the groups
hold the instance's own parameters only. ``ast`` only (the project view reads it on
the path a cache hit takes, which imports no libcst); the optimizer side is
``optimized_models.grouped_model``.
"""

from __future__ import annotations

import ast

_PARAMETER_READS = ("parameters", "named_parameters")
_MODULE_WALKS = ("modules", "children", "named_modules", "named_children")


def param_group_methods(cls: ast.ClassDef) -> tuple[str, ...]:
    """The methods of the model class ``cls`` that hand back groups of the
    instance's own parameters (see the module docstring)."""
    found = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = method.args
        if (
            [a.arg for a in arguments.args] != ["self"]
            or arguments.posonlyargs
            or arguments.kwonlyargs
            or arguments.vararg
            or arguments.kwarg
        ):
            continue
        returns = [n for n in ast.walk(method) if isinstance(n, ast.Return)]
        if not returns or any(r.value is None for r in returns):
            continue
        if _own_parameters_only(method):
            found.append(method.name)
    return tuple(found)


def _own_parameters_only(method: ast.AST) -> bool:
    walkers = {
        name.id
        for loop in ast.walk(method)
        if isinstance(loop, (ast.For, ast.comprehension)) and _walks_self(loop.iter)
        for name in ast.walk(loop.target)
        if isinstance(name, ast.Name)
    }
    reads = [
        node.func.value
        for node in ast.walk(method)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _PARAMETER_READS
    ]
    return bool(reads) and all(_of_self(r, walkers) for r in reads)


def _walks_self(iterable: ast.expr) -> bool:
    """``self.modules()`` (also inside ``enumerate(...)``)."""
    if (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Name)
        and iterable.func.id == "enumerate"
        and iterable.args
    ):
        iterable = iterable.args[0]
    return (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Attribute)
        and iterable.func.attr in _MODULE_WALKS
        and _root(iterable.func.value) == "self"
    )


def _of_self(receiver: ast.expr, walkers: set[str]) -> bool:
    root = _root(receiver)
    return root == "self" or (root in walkers and isinstance(receiver, ast.Name))


def _root(expr: ast.expr) -> str:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else ""
