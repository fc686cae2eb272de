"""Helper functions that build an optimizer over the parameters their caller
hands them and step it around the caller's closure: deep-image-prior's
``optimize(optimizer_type, parameters, closure, LR, num_iter)`` in
utils/common_utils.py, which builds ``torch.optim.Adam(parameters, lr=LR)``
and loops ``optimizer.zero_grad(); closure(); optimizer.step()``, while the
closure (the notebook's, in the script) runs the forward and
``total_loss.backward()``.

The script then has a backward and no optimizer of its own, the helper an
optimizer and no backward: neither reads as a training file alone, yet
together they train the script's network. ``steps_closure`` gives the helper's
``HelperFact.trains`` phrase and the parameter the optimizer is built over, so
that AM004 leaves the script whole with a finding naming the helper (the
optimizer is in another file, which the rule does not prepare), instead of
skipping it as "not a training entry point" with no finding.

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .project_nodes import _own_nodes


def steps_closure(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    is_optimizer: Callable[[ast.Call], bool],
) -> tuple[str, str] | None:
    """(phrase, parameter) when ``function`` builds an optimizer over one of its
    parameters, calls another of its parameters (the caller's closure, or hands
    it to ``optimizer.step``) and steps that optimizer; None otherwise."""
    arguments = function.args
    names = [
        a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    ]
    built: dict[str, tuple[str, ast.Call]] = {}
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and is_optimizer(node.value)
            and node.value.args
            and isinstance(node.value.args[0], ast.Name)
            and node.value.args[0].id in names
        ):
            built[node.targets[0].id] = (node.value.args[0].id, node.value)
    if not built:
        return None
    closure = _called_parameter(function, set(names))
    if closure is None:
        return None
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "step"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in built
        ):
            parameter, call = built[node.func.value.id]
            return (
                f"`{function.name}` builds an optimizer over its parameter "
                f"`{parameter}` (`{ast.unparse(call.func)}(...)`, line {call.lineno}) "
                f"and steps it (line {node.lineno}) around its parameter "
                f"`{closure[0]}` (line {closure[1]}), the caller's closure that "
                "runs the backward",
                parameter,
            )
    return None


def _called_parameter(
    function: ast.FunctionDef | ast.AsyncFunctionDef, names: set[str]
) -> tuple[str, int] | None:
    """A parameter of ``function`` called in it, or in a function it defines
    (deep-image-prior's LBFGS branch wraps it in ``closure2``), with the line."""
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in names
        ):
            return node.func.id, node.lineno
    return None
