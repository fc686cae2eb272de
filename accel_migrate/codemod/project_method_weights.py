"""The losses a model class's methods return, and the parameters that weigh a
term of them (the project view's part that reads them):
``HelperFact.method_losses`` and ``HelperFact.method_weights``.

PyTorch-VAE's models compute their loss in a method of their own,
``loss_function(self, recons, x, mu, log_var, kld_weight)``, returning
``recons_loss + kld_weight * kld_loss``; the training script calls it with
``kld_weight=x.size(0) / len(dataset)``. Where the class is the script's own,
the loss reduction reads the method (``reduction.forward.model_method``); where
it is a class of another module, this fact names the parameters that are a
factor of a product (or a dividend) in the method's returns, followed through
its local variables, so that the caller can check what it hands them
(``reduction.row_weights.method_row_weight``): a weight read off the batch's
row count is the share's on each process, not the global batch's. The
reduction of each method's returned loss is read as a loss function's of the
module is (``HelperFacts.kind_of``); a method that computes a loss the reader
cannot place (``recons_loss + kld_weight * kld_loss``, a weight with no
default) is recorded as unread, so that the caller does not take it for a mean,
unless every term is a mean over the batch's samples (a loss function's mean,
``torch.mean(-0.5 * torch.sum(..., dim=1), dim=0)``: the batch's mean of
per-sample sums), weighed by numbers or by the method's weighing parameters,
whose arguments each caller checks (``reduction.row_weights``): then it is a mean.

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from .names import FUNCTIONAL_LOSSES
from .project_batch_kinds import own_nodes

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

#: How deep a returned expression is followed through local variables.
_DEPTH = 8
#: Methods that are not a loss the caller computes (the model's own call, setup).
_SKIPPED = frozenset({"forward", "__init__", "__call__"})

#: (method, its positional parameters after ``self``, the weighing ones).
MethodWeights = tuple[str, tuple[str, ...], tuple[str, ...]]


def method_losses(
    reader: HelperFacts, lineage: list[ast.ClassDef]
) -> tuple[tuple[str, str], ...]:
    """(method, the reduction of the loss it returns: "mean", "sum",
    "token-mean", "unknown"; "" where it computes a loss whose return the
    reader cannot place) for each method of the lineage's first class (its
    own or inherited; not ``forward``, ``__init__``) that returns a loss."""
    found: list[tuple[str, str]] = []
    for method in _methods(lineage).values():
        returns = [n for n in own_nodes(method) if isinstance(n, ast.Return)]
        if not returns or any(r.value is None for r in returns):
            continue
        kinds = {reader.kind_of(r.value, method, 0) for r in returns}  # type: ignore[arg-type]
        if {k for k, _, _ in kinds} == {"loss"}:
            reductions = {r for _, r, _ in kinds}
            found.append(
                (method.name, reductions.pop() if len(reductions) == 1 else "unknown")
            )
        elif _computes_loss(method, reader._dotted):
            weighing = _weighing_parameters(method)
            placed = {
                _placed(reader, method, r.value, weighing, 0) for r in returns  # type: ignore[arg-type]
            }
            mean = placed == {"mean"}
            found.append((method.name, "mean" if mean else ""))
    return tuple(found)


def _placed(
    reader: HelperFacts,
    method: ast.FunctionDef | ast.AsyncFunctionDef,
    expr: ast.expr,
    weighing: set[str],
    depth: int,
) -> str:
    """ "mean" where ``expr`` is a mean over the batch's samples: a loss
    function's mean (``F.mse_loss(recons, x)``), ``torch.mean(t)`` or
    ``torch.mean(t, dim=0)`` (PyTorch-VAE's KL term, the batch's mean of
    per-sample sums), ``t.mean()``, and sums of such terms, each maybe weighed
    by a number or by a parameter the method weighs a term by
    (``kld_weight``: its callers' arguments are checked where they call,
    ``reduction.row_weights.method_row_weight``); "" otherwise."""
    if depth > _DEPTH:
        return ""
    kind, reduction, _ = reader.kind_of(expr, method, 0)
    if kind == "loss":
        return reduction
    if isinstance(expr, ast.Name):
        values = [
            n.value
            for n in own_nodes(method)
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets)
        ]
        found = {_placed(reader, method, v, weighing, depth + 1) for v in values}
        return found.pop() if len(found) == 1 else ""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _placed(reader, method, expr.operand, weighing, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        left = _placed(reader, method, expr.left, weighing, depth + 1)
        right = _placed(reader, method, expr.right, weighing, depth + 1)
        return left if left == right else ""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        sides = [(expr.left, expr.right)]
        if isinstance(expr.op, ast.Mult):
            sides.append((expr.right, expr.left))
        for term, factor in sides:
            if _weight(factor, weighing):
                return _placed(reader, method, term, weighing, depth + 1)
        return ""
    if isinstance(expr, ast.Call) and _batch_mean(expr, reader._dotted):
        return "mean"
    return ""


def _weight(expr: ast.expr, weighing: set[str]) -> bool:
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool)
    return isinstance(expr, ast.Name) and expr.id in weighing


def _batch_mean(call: ast.Call, dotted: Callable[[ast.expr], str]) -> bool:
    """``torch.mean(t)``, ``torch.mean(t, dim=0)``, ``t.mean()``, ``t.mean(0)``:
    a mean over every element or over the first (the batch's) dimension."""
    if dotted(call.func) == "torch.mean":
        dims = call.args[1:]
    elif isinstance(call.func, ast.Attribute) and call.func.attr == "mean":
        dims = call.args
    else:
        return False
    dims = [*dims, *(k.value for k in call.keywords if k.arg == "dim")]
    if any(k.arg not in ("dim",) for k in call.keywords):
        return False
    if not all(isinstance(d, ast.Constant) and d.value == 0 for d in dims):
        return False
    # not a mean over the rows a mask or indices pick (`t[mask].mean()`): its
    # count differs between the processes' shares
    tensor = call.args[0] if dotted(call.func) == "torch.mean" else call.func.value  # type: ignore[attr-defined]
    return not any(
        isinstance(n, ast.Subscript) and not _sliced(n.slice) for n in ast.walk(tensor)
    ) and not any(
        isinstance(n, ast.Attribute) and n.attr in ("masked_select", "nonzero")
        for n in ast.walk(tensor)
    )


def _sliced(index: ast.expr) -> bool:
    """``t[:, 0]``, ``t[..., :k]``: slices and constants only."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(isinstance(p, (ast.Slice, ast.Constant)) for p in parts)


def _weighing_parameters(method: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The method's parameters that weigh a term of its returns (``method_weights``)."""
    return {w for _, _, weights in method_weights_of([method]) for w in weights}


def _computes_loss(method: ast.AST, dotted: Callable[[ast.expr], str]) -> bool:
    """Does ``method`` call a ``torch.nn.functional`` loss or reduce with
    ``torch.sum``/``torch.mean`` (a loss it computes itself)?"""
    for node in own_nodes(method):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        if name in ("torch.sum", "torch.mean") or (
            name.startswith("torch.nn.functional.")
            and name.rsplit(".", 1)[1] in FUNCTIONAL_LOSSES
        ):
            return True
    return False


def _methods(
    lineage: list[ast.ClassDef],
) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods of the lineage's first class, own or inherited, by name
    (the first in resolution order), but for those ``_SKIPPED``."""
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for cls in lineage:
        for statement in cls.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.setdefault(statement.name, statement)
    return {n: m for n, m in methods.items() if n not in _SKIPPED}


def method_weights(lineage: list[ast.ClassDef]) -> tuple[MethodWeights, ...]:
    """For each method of the lineage's first class (its own, or inherited from
    the bases after it; not ``forward``, ``__init__``) whose returns weigh a
    term by one of its parameters: the method, its positional parameters after
    ``self``, and those weighing parameters."""
    return method_weights_of(list(_methods(lineage).values()))


def method_weights_of(
    methods: list[ast.FunctionDef | ast.AsyncFunctionDef],
) -> tuple[MethodWeights, ...]:
    """``method_weights`` of the given methods."""
    found: list[MethodWeights] = []
    for method in methods:
        arguments = method.args
        positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)][1:]
        parameters = {*positional, *(a.arg for a in arguments.kwonlyargs)}
        assigned: dict[str, list[ast.expr]] = {}
        for node in own_nodes(method):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
        weights: set[str] = set()
        for node in own_nodes(method):
            if isinstance(node, ast.Return) and node.value is not None:
                _weighing(node.value, parameters, assigned, weights, 0, set())
        if weights:
            found.append((method.name, tuple(positional), tuple(sorted(weights))))
    return tuple(found)


def _weighing(
    expr: ast.expr,
    parameters: set[str],
    assigned: dict[str, list[ast.expr]],
    found: set[str],
    depth: int,
    seen: set[str],
) -> None:
    """Add to ``found`` the parameters that are a factor of a product or a
    dividend in ``expr`` (through the method's locals)."""
    if depth > _DEPTH:
        return
    if isinstance(expr, ast.Name):
        if expr.id in assigned and expr.id not in seen:
            for value in assigned[expr.id]:
                _weighing(
                    value, parameters, assigned, found, depth + 1, {*seen, expr.id}
                )
        return
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        operands = (
            [expr.left, expr.right] if isinstance(expr.op, ast.Mult) else [expr.left]
        )
        found.update(
            o.id for o in operands if isinstance(o, ast.Name) and o.id in parameters
        )
    for child in ast.iter_child_nodes(expr):
        if isinstance(child, ast.expr):
            _weighing(child, parameters, assigned, found, depth + 1, seen)
