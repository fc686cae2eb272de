"""A ranking of the samples of an evaluation batch against each other.

A recommender's evaluation batch is often one user's candidate list (NCF's
test loader: ``batch_size=test_num_ng + 1``, the held-out positive first):
``_, indices = torch.topk(predictions, top_k)`` ranks the batch's rows, and
``torch.take(item, indices)`` picks the top items among them; the hit rate and
NDCG are computed from that list. Over a sharded loader each process ranks only
its share of the batch, so the top-k list, and every metric computed from it,
is not the original's, and no sum or mean of the processes' values gives it
back (AM009 and AM029 leave such a loop alone and report it).

Found in a loop over a loader: a ranking (``topk``, ``sort``, ``argsort``,
``kthvalue``) over the first dimension (``dim=0``), or over the default one
whose indices pick rows of the batch (``torch.take(item, indices)``,
``item[indices]``, ``item.index_select(0, indices)``). A classifier's
``output.topk(5, 1)`` ranks classes and is not one. A function of another
module that the script hands a sharded loader is read the same way, with
``ast`` (``helper_batch_ranking``, ``HelperFact.ranks_batch``), for AM006's
finding at the call.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..reduction.pairwise import _RANKINGS, _ranks_batch
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

_PICKS = frozenset({"torch.take", "torch.index_select", "torch.gather"})


def _bound(target: cst.BaseExpression) -> set[str]:
    """The names a ``for`` or assignment target binds."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return {n for e in target.elements for n in _bound(e.value)}
    return {target.value} if isinstance(target, cst.Name) else set()


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _explicit_first_dim(call: cst.Call) -> bool:
    return any(
        a.keyword is not None
        and a.keyword.value == "dim"
        and m.matches(a.value, m.Integer("0"))
        for a in call.args
    )


def _picks_rows(
    index: ModuleIndex, node: cst.CSTNode, batch: set[str], ranked: set[str]
) -> bool:
    """``torch.take(item, indices)``, ``item[indices]``,
    ``item.index_select(0, indices)``: rows of a batch variable picked by a
    ranking's indices."""

    def name_in(expr: cst.BaseExpression, names: set[str]) -> bool:
        return isinstance(expr, cst.Name) and expr.value in names

    if isinstance(node, cst.Subscript):
        return (
            name_in(node.value, batch)
            and len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)
            and name_in(node.slice[0].slice.value, ranked)
        )
    if not isinstance(node, cst.Call):
        return False
    values = [a.value for a in node.args]
    if index.qualnames(node.func) & _PICKS:
        return (
            bool(values)
            and name_in(values[0], batch)
            and any(name_in(v, ranked) for v in values[1:])
        )
    return (
        isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("index_select", "take", "gather")
        and name_in(node.func.value, batch)
        and any(name_in(v, ranked) for v in values)
    )


def batch_ranking(index: ModuleIndex, loop: cst.For) -> cst.Call | None:
    """A ranking of the batch's samples in ``loop``'s body, or None."""
    batch = _bound(loop.target)
    for call in findall(loop.body, m.Call()):
        assert isinstance(call, cst.Call)
        func = call.func
        if not (
            isinstance(func, cst.Attribute)
            and func.attr.value in _RANKINGS
            and _ranks_batch(call, index.qualnames(func))
        ):
            continue
        if _explicit_first_dim(call):
            return call
        ranked: set[str] = set()
        for assign in findall(loop.body, m.Assign()):
            assert isinstance(assign, cst.Assign)
            if any(c is call for c in findall(assign.value, m.Call())):
                for target in assign.targets:
                    ranked |= _bound(target.target)
        if ranked and any(
            _picks_rows(index, node, batch, ranked)
            for node in findall(loop.body, m.Call() | m.Subscript())
        ):
            return call
    return None


def ranking_reason(call: cst.Call) -> str:
    """The needs-review message for a loop that ranks its batch's samples."""
    return (
        f"`{_code(call)}` ranks the samples of each batch against each other (a "
        "candidate list ranked for a hit rate or NDCG): over a sharded loader each "
        "process ranks only its share of the batch, so the ranking and every "
        "metric computed from it differ from the original's and cannot be combined "
        "across processes; the loop is left unchanged. Evaluate with a loader that "
        "is not sharded (on the main process), or score each candidate list "
        "within one sample"
    )


# -- the same, read with ``ast`` in a helper of another module (project facts) --
_AST_PICKS = frozenset({"take", "index_select", "gather"})


def _ast_bound(target: ast.expr) -> set[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for e in target.elts for n in _ast_bound(e)}
    return {target.id} if isinstance(target, ast.Name) else set()


def _ast_ranks_batch(call: ast.Call) -> bool:
    """``torch.topk(x, k)``, ``x.topk(k)``, ``x.sort(dim=0)``: a ranking over
    the default or the first dimension (``_ranks_batch``, read with ``ast``)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in _RANKINGS):
        return False
    shift = 1 if isinstance(func.value, ast.Name) and func.value.id == "torch" else 0
    where = _RANKINGS[func.attr]
    if where is None:
        return True
    dims = [k.value for k in call.keywords if k.arg == "dim"]
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
