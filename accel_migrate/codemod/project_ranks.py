"""Whether a local function's per-element loss (``reduction="none"``) provably
has two dimensions or more, so that a reduction of it over its last dimension
is not over the batch (the project view's ``project_return_kinds``). Static
only: ``ast``."""

from __future__ import annotations

import ast
from collections.abc import Callable

from .names import ALONG_DIM_CALLS, ELEMENTWISE_LOSSES
from .project_nodes import assigned_in
from .reaching_values import reaching_value

#: The project view's resolution of an expression (a qualified name, a local
#: definition, or None where it names no import).
Resolve = Callable[[ast.expr], object]


def loss_at_least_2d(
    target: str, call: ast.Call, function: ast.AST, resolve: Resolve
) -> bool:
    """Is ``call`` (of ``target``, its qualified name) an elementwise loss (its
    value has its inputs' broadcast shape: ``F.kl_div``, ``F.mse_loss``, not
    ``F.cross_entropy``) of an input or target provably 2-D or more
    (``F.log_softmax(pred, dim=1)``)? ``resolve``: an expression's qualified
    name where it names an import (the project view's), else None."""
    prefix, _, name = target.rpartition(".")
    if prefix != "torch.nn.functional" or name not in ELEMENTWISE_LOSSES:
        return False
    inputs = call.args[:2] + [
        k.value for k in call.keywords if k.arg in ("input", "target")
    ]
    return any(at_least_2d(e, function, 0, resolve) for e in inputs)


def at_least_2d(
    expr: ast.expr, function: ast.AST, depth: int, resolve: Resolve
) -> bool:
    """Is ``expr`` provably a tensor of two dimensions or more (else the code
    raises): ``F.log_softmax(x, dim=1)``, ``x.view(n, -1)``, ``x.unsqueeze(1)``,
    or a variable whose value here is one of them?"""
    if depth > 3:
        return False
    if isinstance(expr, ast.Name):
        last = reaching_value(function, expr)
        values = [last] if last is not None else assigned_in(function, expr.id)
        return bool(values) and all(
            at_least_2d(v, function, depth + 1, resolve) for v in values
        )
    if not isinstance(expr, ast.Call) or any(
        isinstance(a, ast.Starred) for a in expr.args
    ):
        return False
    target = resolve(expr.func)
    dims = [k.value for k in expr.keywords if k.arg == "dim"]
    if isinstance(target, str):  # a library's function: `F.log_softmax(x, 1)`
        if target.startswith("torch.") and target.rpartition(".")[2] in ALONG_DIM_CALLS:
            return _positive(dims or expr.args[1:2])
        return False  # `torch.reshape(x, (-1,))`: one shape, of any length
    # a method of a value of this function's (`x.view(n, -1)`, `x.log_softmax(1)`)
    method = expr.func.attr if isinstance(expr.func, ast.Attribute) else ""
    if method in ("view", "reshape"):
        return len(expr.args) >= 2 and not expr.keywords  # a size per dimension
    if method == "unsqueeze" or method in ALONG_DIM_CALLS:
        return _positive(dims or expr.args[:1])
    return False


def _positive(values: list[ast.expr]) -> bool:
    """Is the one value a literal dimension >= 1 (of fewer dimensions it
    raises)?"""
    return (
        len(values) == 1
        and isinstance(values[0], ast.Constant)
        and isinstance(values[0].value, int)
        and not isinstance(values[0].value, bool)
        and values[0].value >= 1
    )
