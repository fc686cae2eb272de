"""Whether a local function's per-element loss (``reduction="none"``) provably
has two dimensions or more, so that a reduction of it over its last dimension
is not over the batch (the project view's ``project_return_kinds``). Static
only: ``ast``."""

from __future__ import annotations

import ast

from .names import ELEMENTWISE_LOSSES
from .project_nodes import _assigned_in
from .reaching_values import reaching_value

#: Calls whose ``dim`` (a literal >= 1) needs an input of two dimensions or more,
#: and whose value has the input's shape.
_ALONG_DIM = frozenset({"softmax", "log_softmax", "normalize", "cumsum"})


def loss_at_least_2d(target: str, call: ast.Call, function: ast.AST) -> bool:
    """Is ``call`` (of ``target``, its qualified name) an elementwise loss (its
    value has its inputs' broadcast shape: ``F.kl_div``, ``F.mse_loss``, not
    ``F.cross_entropy``) of an input or target provably 2-D or more
    (``F.log_softmax(pred, dim=1)``)?"""
    prefix, _, name = target.rpartition(".")
    if prefix != "torch.nn.functional" or name not in ELEMENTWISE_LOSSES:
        return False
    inputs = call.args[:2] + [
        k.value for k in call.keywords if k.arg in ("input", "target")
    ]
    return any(at_least_2d(e, function, 0) for e in inputs)


def at_least_2d(expr: ast.expr, function: ast.AST, depth: int) -> bool:
    """Is ``expr`` provably a tensor of two dimensions or more (else the code
    raises): ``F.log_softmax(x, dim=1)``, ``x.view(n, -1)``, ``x.unsqueeze(1)``,
    or a variable whose value here is one of them?"""
    if depth > 3:
        return False
    if isinstance(expr, ast.Name):
        last = reaching_value(function, expr)
        values = [last] if last is not None else _assigned_in(function, expr.id)
        return bool(values) and all(at_least_2d(v, function, depth + 1) for v in values)
    if not isinstance(expr, ast.Call) or any(
        isinstance(a, ast.Starred) for a in expr.args
    ):
        return False
    method = expr.func.attr if isinstance(expr.func, ast.Attribute) else ""
    dims = [k.value for k in expr.keywords if k.arg == "dim"]
    if method in ("view", "reshape"):
        return len(expr.args) >= 2 and not expr.keywords  # a size per dimension
    if method == "unsqueeze" or (method in _ALONG_DIM and _is_tensor_method(expr)):
        return _positive(dims or expr.args[:1])
    if _last_name(expr.func) in _ALONG_DIM:
        return _positive(dims or expr.args[1:2])
    return False


def _is_tensor_method(call: ast.Call) -> bool:
    """``x.log_softmax(1)``, not ``F.log_softmax(x, 1)`` (a module's function)."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and not (isinstance(func.value, ast.Name) and func.value.id in ("F", "torch"))
        and not isinstance(func.value, ast.Attribute)
    )


def _last_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


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
