"""Training steps a function builds and hands back as a closure.

BigGAN-PyTorch's ``train_fns.GAN_training_function(G, D, GD, z_, y_, ema,
state_dict, config)`` defines ``def train(x, y):`` inside itself, whose body
runs ``GD(...)``, calls ``D_loss.backward()`` and ``D.optim.step()``, and
``return train``; the script then calls ``train(x, y)`` on every batch of its
loader. The step trains the models its factory is handed, though the factory's
own body has no backward: ``function_trainers`` asks ``returned_closures`` for
the nested functions a factory returns and reads the step there.

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from .model_uses import _backward_calls, _used_value_as_model
from .project_nodes import _own_nodes

Function = ast.FunctionDef | ast.AsyncFunctionDef


def returned_closures(function: Function) -> Iterator[tuple[Function, int]]:
    """The functions defined in ``function``'s own body (not deeper) that it
    returns by name (``return train``, ``return train, evaluate``), with the
    line of the return, in the order of the returns."""
    nested = {
        node.name: node
        for node in _own_nodes(function)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    if not nested:
        return
    returns = sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Return)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    seen: set[str] = set()
    for node in returns:
        value = node.value
        names = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        for name in names:
            if isinstance(name, ast.Name) and name.id in nested and name.id not in seen:
                seen.add(name.id)
                yield nested[name.id], node.lineno


def own_parameters(function: Function) -> set[str]:
    """Every parameter name ``function`` binds (they shadow an enclosing
    function's names in its body)."""
    arguments = function.args
    names = {
        a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    }
    for extra in (arguments.vararg, arguments.kwarg):
        if extra is not None:
            names.add(extra.arg)
    return names


def closure_trains(
    factory: str,
    step: Function,
    returned: int,
    parameter: Callable[[ast.expr], str | None],
) -> tuple[str, str] | None:
    """(phrase, parameter) when the nested function ``step`` that ``factory``
    returns calls backward in a step that runs one of ``factory``'s parameters
    (``parameter``) that ``step`` does not shadow with its own."""
    backward = next(_backward_calls(step), None)
    if backward is None:
        return None
    shadowed = own_parameters(step)

    def outer(expr: ast.expr) -> str | None:
        name = parameter(expr)
        return name if name is not None and name not in shadowed else None

    used = _used_value_as_model(step, outer)
    if used is None:
        return None
    return (
        f"`{factory}` returns `{step.name}` (line {returned}), a step that calls "
        f"backward (line {backward.lineno}) and runs `{used}`, its parameter",
        used,
    )
