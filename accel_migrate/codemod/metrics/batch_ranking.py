"""A ranking of the samples of an evaluation batch against each other.

A recommender's evaluation batch is often one user's candidate list (NCF's
test loader: ``batch_size=test_num_ng + 1``, the held-out positive first):
``_, indices = torch.topk(predictions, top_k)`` ranks the batch's rows, and
``torch.take(item, indices)`` picks the top items among them; the hit rate and
NDCG are computed from that list. Over a sharded loader each process ranks only
its share of the batch, so the top-k list, and every metric computed from it,
is not the original's, and no sum or mean of the processes' values gives it
back (AM009 and AM029 leave such a loop alone and report it).

A one-shot verifier's N-way trial is the same shape (fangpin/siamese-pytorch:
the test loader's ``batch_size=way``, the matching pair first, ``pred =
np.argmax(output)`` over the trial's scores, ``right += 1`` when it is 0): each
process would pick the best of its share of the trial.

Found in a loop over a loader: a ranking (``topk``, ``sort``, ``argsort``,
``kthvalue``) over the first dimension (``dim=0``), or over the default one
whose indices pick rows of the batch (``torch.take(item, indices)``,
``item[indices]``, ``item.index_select(0, indices)``); or an ``argmax`` /
``argmin`` (numpy's or torch's, function or method) with no dimension (over
the whole, flattened, array) or over the first one, of a value the loop
computes. A classifier's ``output.topk(5, 1)`` or ``output.argmax(1)`` ranks
classes and is not one. A function of another
module that the script hands a sharded loader is read the same way, with
``ast`` (``metrics/helper_ranking.py``, ``HelperFact.ranks_batch``), for
AM006's finding at the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..batches import batch_size_of, loader_loop
from ..reduction.pairwise import _RANKINGS, _ranks_batch
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

_PICKS = frozenset({"torch.take", "torch.index_select", "torch.gather"})
#: Functions that pick the index of the largest (smallest) element, input first.
_ARG_PICKS = frozenset({"numpy.argmax", "numpy.argmin", "torch.argmax", "torch.argmin"})


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


def _loop_values(loop: cst.For) -> set[str]:
    """The names ``loop`` binds: its target's and those assigned in its body."""
    names = _bound(loop.target)
    for assign in findall(loop.body, m.Assign()):
        assert isinstance(assign, cst.Assign)
        for target in assign.targets:
            names |= _bound(target.target)
    return names


def _whole_argmax(index: ModuleIndex, call: cst.Call, values: set[str]) -> bool:
    """``np.argmax(output)``, ``scores.argmax()``, ``torch.argmin(d, dim=0)``: the
    index of the best element over the whole array or its first dimension, of a
    value the loop computes (``values``)."""
    args = list(call.args)
    if index.qualnames(call.func) & _ARG_PICKS:
        if not args or args[0].keyword is not None:
            return False
        operand, rest = args[0].value, args[1:]
    elif isinstance(call.func, cst.Attribute) and call.func.attr.value in (
        "argmax",
        "argmin",
    ):
        operand, rest = call.func.value, args
    else:
        return False
    dims = [
        a.value for a in rest if a.keyword is None or a.keyword.value in ("dim", "axis")
    ]
    if dims and not m.matches(dims[0], m.Integer("0")):
        return False
    used = {n.value for n in findall(operand, m.Name())}
    return bool(used & values)


def _one_sample_batches(index: ModuleIndex, loop: cst.For) -> bool:
    """Every loader ``loop`` steps through gives one sample a batch (``batch_size=1``
    or none given): an ``argmax`` over its output picks among one sample's values."""
    found = loader_loop(index, loop)
    if found is None:
        return False
    for loader in found.loaders:
        size = batch_size_of(index, loader)
        if size is not None and not m.matches(size, m.Integer("1")):
            return False
    return True


def batch_ranking(
    index: ModuleIndex,
    loop: cst.For,
    over_loader: Callable[[cst.BaseExpression], bool] | None = None,
) -> cst.Call | None:
    """A ranking of the batch's samples in ``loop``'s body, or None.
    ``over_loader`` tells the loops of the body that step through a loader
    (their own rankings are theirs); by default the index's loader loops."""
    batch = _bound(loop.target)
    if over_loader is None:
        over_loader = lambda iterable: index.loader_loop(iterable)[0]  # type: ignore[attr-defined]  # noqa: E731
    if not _one_sample_batches(index, loop):
        values = _loop_values(loop)
        nested = {
            id(c)
            for inner in findall(loop.body, m.For())
            if over_loader(inner.iter)
            for c in findall(inner, m.Call())
        }
        for call in findall(loop.body, m.Call()):
            assert isinstance(call, cst.Call)
            if id(call) not in nested and _whole_argmax(index, call, values):
                return call
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
        "candidate list ranked for a hit rate or NDCG, an N-way trial scored by its "
        "best match): over a sharded loader each "
        "process ranks only its share of the batch, so the ranking and every "
        "metric computed from it differ from the original's and cannot be combined "
        "across processes; the loop is left unchanged. Evaluate with a loader that "
        "is not sharded (on the main process), or score each candidate list "
        "within one sample"
    )
