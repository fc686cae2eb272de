"""Parameters that weigh a term of what a model class's method returns (the
project view's part that reads them): ``HelperFact.method_weights``.

PyTorch-VAE's models compute their loss in a method of their own,
``loss_function(self, recons, x, mu, log_var, kld_weight)``, returning
``recons_loss + kld_weight * kld_loss``; the training script calls it with
``kld_weight=x.size(0) / len(dataset)``. Where the class is the script's own,
the loss reduction reads the method (``reduction.forward.model_method``); where
it is a class of another module, this fact names the parameters that are a
factor of a product (or a dividend) in the method's returns, followed through
its local variables, so that the caller can check what it hands them
(``reduction.row_weights.method_row_weight``): a weight read off the batch's
row count is the share's on each process, not the global batch's.

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast

from .project_batch_kinds import own_nodes

#: How deep a returned expression is followed through local variables.
_DEPTH = 8
#: Methods that are not a loss the caller computes (the model's own call, setup).
_SKIPPED = frozenset({"forward", "__init__", "__call__"})

#: (method, its positional parameters after ``self``, the weighing ones).
MethodWeights = tuple[str, tuple[str, ...], tuple[str, ...]]


def method_weights(lineage: list[ast.ClassDef]) -> tuple[MethodWeights, ...]:
    """For each method of the lineage's first class (its own, or inherited from
    the bases after it; not ``forward``, ``__init__``) whose returns weigh a
    term by one of its parameters: the method, its positional parameters after
    ``self``, and those weighing parameters."""
    found: list[MethodWeights] = []
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for cls in lineage:
        for statement in cls.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.setdefault(statement.name, statement)
    for method in methods.values():
        if method.name in _SKIPPED:
            continue
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
