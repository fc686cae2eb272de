"""How a loss class of a local module reduces the batch when an instance of it is
called: the project view's ``HelperFact.call_reduction``.

The FNO repository's ``utilities3.py`` defines ``class LpLoss(object)`` whose
``__call__`` returns ``self.rel(x, y)``, and ``rel`` returns
``torch.sum(diff_norms / y_norms)`` under ``size_average=False`` (a sum of the
per-sample relative errors over the batch) or ``torch.mean(...)`` otherwise;
the training script does ``myloss = LpLoss(size_average=False)`` and
``loss = myloss(out, y)``. Before this fact the call of such an instance was
taken for a mean over samples (the default of every ``torch.nn`` loss): each
process's gradient of its share's sum was averaged, half the original's at
world size 2, and the logged ``train_l2`` halved too, with no finding.

Read: ``forward`` where the class defines one, else ``__call__``; its
``return`` statements, a ``return self.method(...)`` followed into that method
of the class (a few levels), a returned local name through its assignments in
that method. A return counts as a ``sum`` where it is ``torch.sum(X)`` or
``X.sum()`` over every dimension (no ``dim``), a ``mean`` for ``torch.mean`` /
``.mean()`` likewise. Every return a sum: ``("sum", ...)``; every one a mean:
``("mean", ...)``; some a full reduction and the others another one or not read
(``if self.size_average: ... else: ...``, or a per-sample return under
``reduction=False``): ``("unknown", why)``, the reduction is chosen at run time
from the instance's settings, which this view does not follow. No return a full
reduction (a model returning logits): ``("", "")``, the fact says nothing.
Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast

from .project_nodes import _own_nodes, assigned_in

_DEPTH = 4
_HOW = {"sum": "sum", "mean": "mean", "nansum": "sum", "nanmean": "mean"}


def call_reduction(cls: ast.ClassDef) -> tuple[str, str]:
    """(kind, why) of what calling an instance of ``cls`` returns: ``("sum",
    "")``, ``("mean", "")``, ``("unknown", why)``, or ``("", "")`` where no
    return is a full sum or mean."""
    methods = {
        node.name: node
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    entry = methods.get("forward") or methods.get("__call__")
    if entry is None:
        return ("", "")
    kinds: list[str] = []
    _returns(entry, methods, kinds, 0)
    read = {k for k in kinds if k in ("sum", "mean")}
    if not read:
        return ("", "")
    if len(read) == 1 and len(set(kinds)) == 1:
        return (read.pop(), "")
    return (
        "unknown",
        f"`{cls.name}.{entry.name}` returns a sum over the batch on one path and "
        "a mean or an unreduced value on another, chosen at run time (a setting "
        "such as `size_average` or `reduction` of the instance)",
    )


def _returns(
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    kinds: list[str],
    depth: int,
) -> None:
    for node in _own_nodes(method):
        if isinstance(node, ast.Return):
            if node.value is None:
                kinds.append("")
                continue
            _value(node.value, method, methods, kinds, depth)


def _value(
    expr: ast.expr,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    kinds: list[str],
    depth: int,
) -> None:
    if depth > _DEPTH:
        kinds.append("")
        return
    if isinstance(expr, ast.IfExp):
        for branch in (expr.body, expr.orelse):
            _value(branch, method, methods, kinds, depth + 1)
        return
    if isinstance(expr, ast.Name):
        values = assigned_in(method, expr.id)
        if not values:
            kinds.append("")
        for value in values:
            _value(value, method, methods, kinds, depth + 1)
        return
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        func = expr.func
        if (
            isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and func.attr in methods
        ):
            _returns(methods[func.attr], methods, kinds, depth + 1)
            return
        how = _HOW.get(func.attr)
        full = not expr.keywords
        if how is not None and full:
            torch_call = isinstance(func.value, ast.Name) and func.value.id == "torch"
            if torch_call and len(expr.args) == 1:
                kinds.append(how)  # torch.sum(x)
                return
            if not torch_call and not expr.args:
                kinds.append(how)  # x.sum()
                return
    kinds.append("")
