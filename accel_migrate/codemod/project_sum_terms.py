"""Summed terms of a loss returned by a local module's function (the project view).

What: ``return rec + beta * torch.sum(torch.abs(code))`` (a sum-reduced loss plus
a penalty summed over the elements of a parameter, the VAE example's
``loss_function`` in its own module) is read as a sum-reduced loss, noting the
parameters summed over (``code``) and those that scale a term (``beta``).

Why: the penalty is a sum over the batch only when the caller hands a value of
the batch's samples (a model output) for ``code``, and the scale is the same on
every process only when it is a setting. The helper's file cannot tell; each
call is checked where it backpropagates (``reduction.summed_args``).

Example: ``loss_function(recon, data, code)`` with ``recon, code = model(data)``
is a sum (``accel.backward(loss, reduction="sum")``); with ``model.enc.weight``
for ``code``, or ``beta=1 / len(data)``, its reduction is unknown (AM007).

Fix-safety: only element-wise functions of bare parameters are summed terms
(``torch.sum(x)`` and ``x.sum()`` with no dimension); scales are numbers or
parameters whose default is a number. Anything else leaves the loss unread.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Protocol

#: Element-wise tensor functions (torch.X(t) and t.X()): a sum of them over a
#: per-sample tensor is a sum over its samples.
_ELEMENTWISE = frozenset({"abs", "square", "pow", "exp", "log", "sqrt", "neg"})
_DEPTH = 12


class _Names(Protocol):
    def _dotted(self, expr: ast.expr) -> str: ...


class SumTerms:
    """The summed terms of one function's returned loss, as they are read."""

    def __init__(
        self,
        names: _Names,
        function: ast.AST | None,
        assigned: Callable[[ast.AST, str], list[ast.expr]],
    ) -> None:
        self.names, self.function, self._assigned = names, function, assigned
        #: Parameters a term sums over, and parameters that scale a term.
        self.summed: set[str] = set()
        self.scales: set[str] = set()

    def fields(self) -> dict[str, tuple[str, ...]]:
        """The HelperFact fields of a loss with summed terms ({} without)."""
        function = self.function
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not (
            self.summed or self.scales
        ):
            return {}
        args = function.args
        return {
            "summed_params": tuple(sorted(self.summed)),
            "scale_params": tuple(sorted(self.scales)),
            "params": tuple(a.arg for a in (*args.posonlyargs, *args.args)),
        }

    def scale(self, expr: ast.expr) -> bool:
        """A number, or a parameter whose default is one (``beta=0.01``: the
        callers' values are checked where they call)."""
        if isinstance(expr, ast.Constant):
            return _number(expr.value)
        if isinstance(expr, ast.Name) and expr.id in self._constant_defaults():
            self.scales.add(expr.id)
            return True
        return False

    def batch_sum(self, expr: ast.expr, depth: int) -> bool:
        """``torch.sum(f(code))`` / ``f(code).sum()`` of element-wise functions of
        parameters (each noted in ``summed``), maybe scaled (``scale``)."""
        if depth > _DEPTH or self.function is None:
            return False
        if isinstance(expr, ast.Name):
            values = self._assigned(self.function, expr.id)
            return len(values) == 1 and self.batch_sum(values[0], depth + 1)
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
            return self.batch_sum(expr.operand, depth + 1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
            if self.batch_sum(expr.left, depth + 1):
                return self.scale(expr.right)
            return isinstance(expr.op, ast.Mult) and (
                self.scale(expr.left) and self.batch_sum(expr.right, depth + 1)
            )
        if not isinstance(expr, ast.Call) or expr.keywords:
            return False
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr == "sum" and not expr.args:
            return self._elementwise(func.value, depth + 1)
        if self.names._dotted(func) == "torch.sum" and len(expr.args) == 1:
            return self._elementwise(expr.args[0], depth + 1)
        return False

    def _elementwise(self, expr: ast.expr, depth: int) -> bool:
        if depth > _DEPTH or self.function is None:
            return False
        if isinstance(expr, ast.Name):
            if expr.id not in _parameters(self.function) or self._assigned(
                self.function, expr.id
            ):
                return False
            self.summed.add(expr.id)
            return True
        if isinstance(expr, ast.Constant):
            return _number(expr.value)
        if isinstance(expr, ast.UnaryOp):
            return self._elementwise(expr.operand, depth + 1)
        if isinstance(expr, ast.BinOp):
            return self._elementwise(expr.left, depth + 1) and self._elementwise(
                expr.right, depth + 1
            )
        if not isinstance(expr, ast.Call) or expr.keywords:
            return False
        func = expr.func
        constants = all(isinstance(a, ast.Constant) for a in expr.args)
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _ELEMENTWISE
            and not self.names._dotted(func)
        ):
            return constants and self._elementwise(func.value, depth + 1)
        name = self.names._dotted(func)
        if (
            name.startswith("torch.")
            and name.rsplit(".", 1)[1] in _ELEMENTWISE
            and expr.args
        ):
            rest = all(isinstance(a, ast.Constant) for a in expr.args[1:])
            return rest and self._elementwise(expr.args[0], depth + 1)
        return False

    def _constant_defaults(self) -> set[str]:
        """The parameters whose default is a number (``beta=0.01``)."""
        function = self.function
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return set()
        args = function.args
        positional = [*args.posonlyargs, *args.args]
        defaulted = positional[len(positional) - len(args.defaults) :]
        pairs = list(zip(defaulted, args.defaults, strict=True))
        pairs += [
            (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d
        ]
        return {
            a.arg
            for a, d in pairs
            if isinstance(d, ast.Constant)
            and _number(d.value)
            and not self._assigned(function, a.arg)
        }


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _parameters(function: ast.AST) -> list[str]:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
