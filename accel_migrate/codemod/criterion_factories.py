"""Functions that build and return a ``torch.nn`` loss module (a criterion
factory: ``build_criterion(cfg)`` returning ``nn.MSELoss(reduction="sum")`` or
``nn.L1Loss(reduction="sum")`` by branch), and the reduction of what they
return (``HelperFact.criterion``).

A script that writes ``criterion = build_criterion()`` and backpropagates
``criterion(out, y)``, itself or through a function it hands the criterion to,
computes a loss of that reduction. The project view read such a function as
returning nothing it knew, so the loss was weighed as a mean over samples: a
summed criterion's gradient halved at two processes, with no finding.

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .names import MODULE_MOVES
from .project_nodes import _own_nodes

if TYPE_CHECKING:
    from .project_helpers import HelperFacts


def unmoved(value: ast.expr) -> ast.expr:
    """``nn.MSELoss(reduction="sum")`` of ``nn.MSELoss(reduction="sum").cuda()``."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in MODULE_MOVES
    ):
        value = value.func.value
    return value


def criterion_factory(
    reader: HelperFacts, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> str:
    """The reduction ("mean", "sum", "none", "token-mean", "unknown") of the loss
    modules ``function`` (of ``reader``'s module) returns, where a return builds
    one: the one reduction of every return where each does; "unknown" where one
    does and another differs or builds something else; "" where none does."""
    returns = [r for r in _own_nodes(function) if isinstance(r, ast.Return)]
    found: set[str] = set()
    for node in returns:
        value = unmoved(node.value) if node.value is not None else None
        kind, reduction, _ = (
            reader._loss_module(value) if isinstance(value, ast.Call) else ("", "", "")
        )
        if kind == "loss" and not _settings_read(value):  # type: ignore[arg-type]
            reduction = "unknown"
        found.add(reduction if kind == "loss" else "")
    if found <= {""}:
        return ""
    return found.pop() if len(found) == 1 else "unknown"


#: Keywords whose constant value the reduction is read from.
_SETTINGS = frozenset({"reduction", "size_average", "reduce"})


def _settings_read(construct: ast.Call) -> bool:
    """Are the settings of the loss module ``construct`` builds all written as
    keywords with constant values (``nn.MSELoss(reduction="sum")``)? Not where
    they are positional (``nn.MSELoss(False)``: size_average), unpacked
    (``**kw``, ``*args``), computed (``size_average=avg``) or ``reduce=``
    (rev19a: each was read as a mean)."""
    if construct.args:
        return False
    for keyword in construct.keywords:
        if keyword.arg is None:
            return False
        if keyword.arg == "reduce":
            return False
        if keyword.arg in _SETTINGS and not isinstance(keyword.value, ast.Constant):
            return False
    return True
