"""A ranking of a batch's samples in a helper of another module, read with ``ast``.

The project view's side of ``metrics/batch_ranking.py``: a function of a local
module that the script hands a sharded loader (NCF's ``evaluate.metrics(model,
test_loader, top_k)``) and whose loop ranks the samples of each batch against
each other (``HelperFact.ranks_batch``, named by AM006's finding at the call).
``ast`` only: the project view runs without libcst (a re-run the cache answers
imports neither libcst nor the rules).
"""

from __future__ import annotations

import ast

#: Methods (and ``torch.`` functions) that rank values along a dimension, with the
#: position of that dimension among the method's positional arguments (None:
#: always the first dimension). ``reduction/pairwise.py`` reads it too.
RANKINGS = {"topk": 1, "kthvalue": 1, "sort": 0, "argsort": 0, "msort": None}

_AST_PICKS = frozenset({"take", "index_select", "gather"})


def _ast_bound(target: ast.expr) -> set[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for e in target.elts for n in _ast_bound(e)}
    return {target.id} if isinstance(target, ast.Name) else set()


def _ast_ranks_batch(call: ast.Call) -> bool:
    """``torch.topk(x, k)``, ``x.topk(k)``, ``x.sort(dim=0)``: a ranking over
    the default or the first dimension (``_ranks_batch``, read with ``ast``)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in RANKINGS):
        return False
    # torch.topk(input, k, dim), np.argsort(a, axis): the input comes first
    functions = ("torch", "np", "numpy")
    shift = 1 if isinstance(func.value, ast.Name) and func.value.id in functions else 0
    where = RANKINGS[func.attr]
    if where is None:
        return True
    dims = [k.value for k in call.keywords if k.arg in ("dim", "axis")]
    if not dims and len(call.args) > where + shift:
        dims = [call.args[where + shift]]
    return not dims or (isinstance(dims[0], ast.Constant) and dims[0].value == 0)


def helper_batch_ranking(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """For a function of another module: a loop whose body ranks its batch's
    samples (``batch_ranking``'s shapes), as a phrase (```torch.topk(predictions,
    top_k)`, line 26``); "" if none. Any ``for`` counts: the function is
    handed the loader by its callers."""
    for loop in ast.walk(function):
        if not isinstance(loop, ast.For):
            continue
        batch = _ast_bound(loop.target)
        for call in (n for s in loop.body for n in ast.walk(s)):
            if not (isinstance(call, ast.Call) and _ast_ranks_batch(call)):
                continue
            spelled = f"`{ast.unparse(call)}`, line {call.lineno}"
            if any(k.arg == "dim" for k in call.keywords):
                return spelled
            ranked = {
                n
                for s in loop.body
                for a in ast.walk(s)
                if isinstance(a, ast.Assign) and call in list(ast.walk(a.value))
                for t in a.targets
                for n in _ast_bound(t)
            }
            if ranked and any(
                _ast_picks(node, batch, ranked)
                for s in loop.body
                for node in ast.walk(s)
            ):
                return spelled
    return ""


def _ast_picks(node: ast.AST, batch: set[str], ranked: set[str]) -> bool:
    def named(expr: ast.expr, names: set[str]) -> bool:
        return isinstance(expr, ast.Name) and expr.id in names

    if isinstance(node, ast.Subscript):
        return named(node.value, batch) and named(node.slice, ranked)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr not in _AST_PICKS:
        return False
    if isinstance(node.func.value, ast.Name) and node.func.value.id == "torch":
        return (
            bool(node.args)
            and named(node.args[0], batch)
            and any(named(a, ranked) for a in node.args[1:])
        )
    return named(node.func.value, batch) and any(named(a, ranked) for a in node.args)
