"""Losses that compare the samples of a batch with each other.

A contrastive loss (SimCLR's NT-Xent: ``torch.mm(z, z.t())``, every other sample
of the batch a negative), a batch-hard triplet loss (``torch.cdist(emb, emb)``,
the hardest positive and negative mined in the batch) or a similarity matrix
``F.cosine_similarity(a.unsqueeze(1), b.unsqueeze(0), dim=-1)`` is a function of
the whole batch, not a mean of per-sample terms: each process would compare only
its share's samples with each other, and no weighting of the per-process losses
gives back the original's loss or gradients.

The search follows the loss's variables a few assignments back (the assignment
just before the use where a block has one: ``loss = ...`` twice in a loop), into the
bodies of this file's functions (``nt_xent(z1, z2)``) and the ``forward`` of
instances of its classes (``criterion = NTXentLoss(); criterion(z1, z2)``) that
the loss is computed by. A selection of samples by their rank in the batch (online hard example mining:
``losses.topk(k)``, ``losses.sort(descending=True)``, ``kthvalue``, over the
default or the first dimension) compares them too, and so do rows picked by
two index tensors and subtracted (an online triplet loss's
``emb[triplets[:, 0]] - emb[triplets[:, 1]]``, a loss module handed to a
parameter by the batch's other files included): each process would keep the
hardest of its own share. So does a difference of rows broadcast against rows
(``x.unsqueeze(1).expand(n, m, d) - y.unsqueeze(0).expand(n, m, d)``, the
Prototypical Networks' distances of every query to every prototype built from
the batch's support rows; ``a[:, None] - b[None]``), and so does a join of
two tensors broadcast along new dimensions 0 and 1 (``torch.cat((s.unsqueeze(0)
.repeat(n, 1, 1), torch.transpose(q.unsqueeze(0).repeat(c, 1, 1), 0, 1)), 2)``,
the Relation Network's pairs of every query with every class feature, which a
module then scores). Products with a transposed attribute (``x @
self.weight.t()``: a layer's weights) and transposes of other dimensions
(``q @ k.transpose(-2, -1)``: attention over tokens) are not comparisons of
samples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..metrics.helper_ranking import RANKINGS
from ..pairwise_helpers import rows_against_rows
from ..subtrees import findall
from . import _Reducer
from .placement import code

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex


def _picked_rows_paired(node: cst.BinaryOperation) -> bool:
    """``emb[triplets[:, 0]] - emb[triplets[:, 1]]``: rows of one tensor picked
    by two index tensors and set against each other (the pairs an online
    triplet miner chose over the batch); not a slice, a constant or one index
    on both sides (``pairwise_helpers._picked_rows_paired``, in this file)."""
    left, right = node.left, node.right
    if not (
        isinstance(left, cst.Subscript)
        and isinstance(right, cst.Subscript)
        and isinstance(left.value, cst.Name)
        and isinstance(right.value, cst.Name)
        and left.value.value == right.value.value
        and len(left.slice) == 1
        and len(right.slice) == 1
    ):
        return False
    picks = (left.slice[0].slice, right.slice[0].slice)
    if not all(isinstance(p, cst.Index) for p in picks):
        return False
    values = [p.value for p in picks]  # type: ignore[attr-defined]
    if any(isinstance(v, (cst.Integer, cst.Tuple)) for v in values):
        return False
    return code(values[0]) != code(values[1])


#: Functions that compare every row of one input with every row of another.
_DISTANCES = frozenset({"torch.cdist", "torch.pdist", "torch.nn.functional.pdist"})
_PRODUCTS = frozenset({"torch.mm", "torch.matmul"})
_SIMILARITIES = frozenset(
    {
        "torch.cosine_similarity",
        "torch.nn.functional.cosine_similarity",
        "torch.nn.functional.pairwise_distance",
        "torch.pairwise_distance",
    }
)
_DEPTH = 4
#: Methods that rank values along a dimension (``metrics/helper_ranking.py``).
_RANKINGS = RANKINGS


def pairwise_comparison(
    index: ModuleIndex, expr: cst.BaseExpression, at: cst.CSTNode
) -> str | None:
    """The spelling of a comparison of the batch's samples with each other that
    ``expr`` (a loss, used by ``at``) is computed from, in backquotes (and where,
    for one made in a helper module), or None."""
    return _Search(index).find(expr, 0, at)


class _Search:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.reducer = _Reducer(index)
        self.visited: set[int] = set()

    def find(self, expr: cst.CSTNode | None, depth: int, at: cst.CSTNode) -> str | None:
        if expr is None or depth > _DEPTH or id(expr) in self.visited:
            return None
        self.visited.add(id(expr))
        for node in findall(expr, m.Call() | m.BinaryOperation()):
            found = self._compares(node)
            if found is not None:
                return f"`{found}`"
            if isinstance(node, cst.Call):
                helper = self._helper_pairwise(node)
                if helper is not None:
                    return helper
                body = self._callee_body(node)
                found = self.find(body, depth + 1, body) if body is not None else None
                if found is not None:
                    return found
        for name in findall(expr, m.Name()):
            key = self.index.key(name)  # type: ignore[arg-type]
            if key is None:
                continue
            values = [v for v in self.index.values.get(key, ()) if v is not None]
            reaching = self.reducer._reaching(key, at)
            for value in [reaching] if reaching in values else values:
                found = self.find(value, depth + 1, value)
                if found is not None:
                    return found
            # `loss, acc = nll_of_scores(q, ctx)`: the call it was unpacked from
            for value, _, _ in self.index.unpacked.get(key, ()):
                found = self.find(value, depth + 1, value)
                if found is not None:
                    return found
            # `criterion` a parameter of `train(loader, model, criterion, opt)`:
            # what the file's calls of `train` pass for it (SupContrast's
            # SupConLoss built in main, or unpacked from `set_model(opt)`)
            for passed in handed_arguments(self.index, key):
                found = self.find(passed, depth + 1, passed)
                if found is not None:
                    return found
        return None

    def _compares(self, node: cst.CSTNode) -> str | None:
        if isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.MatrixMultiply) and _rows_transposed(
                node.right
            ):
                return code(node)
            if isinstance(node.operator, cst.Subtract) and _picked_rows_paired(node):
                return code(node)
            if isinstance(node.operator, cst.Subtract):
                return self._broadcast_difference(node)
            return None
        assert isinstance(node, cst.Call)
        names = self.index.qualnames(node.func)
        args = [a.value for a in node.args if a.keyword is None]
        if names & _DISTANCES or (names & _EINSUM and _rows_against_rows(node)):
            return code(node)
        if names & _PRODUCTS and len(args) == 2 and _rows_transposed(args[1]):
            return code(node)
        if (
            isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("mm", "matmul")
            and len(args) == 1
            and _rows_transposed(args[0])
        ):
            return code(node)
        if names & _SIMILARITIES and any(_broadcast_rows(a) for a in args):
            return code(node)
        if names & _JOINS and self._joined_pairs(node):
            return code(node)
        if _ranks_batch(node, names):
            return code(node)
        return None

    def _broadcast_difference(self, node: cst.BinaryOperation) -> str | None:
        """``x.unsqueeze(1).expand(n, m, d) - y.unsqueeze(0).expand(n, m, d)``
        or ``a[:, None] - b[None]``, a side also read through a name's one value
        (``x = x.unsqueeze(1)...`` then ``x - y``): every row of one tensor
        against every row of the other (``pairwise_helpers``, in this file)."""
        sides = []
        for side in (node.left, node.right):
            if isinstance(side, cst.Name):
                key = self.index.key(side)
                values = self.index.values.get(key, ()) if key is not None else ()
                if len(values) == 1 and values[0] is not None:
                    side = values[0]
            sides.append(side)
        if {_broadcast_axis(sides[0]), _broadcast_axis(sides[1])} != {0, 1}:
            return None
        return f"{code(sides[0])} - {code(sides[1])}"

    def _joined_pairs(self, call: cst.Call) -> bool:
        """``torch.cat((s.unsqueeze(0).repeat(n, 1, 1), torch.transpose(
        q.unsqueeze(0).repeat(c, 1, 1), 0, 1)), 2)``: one tensor broadcast along
        a new dimension 0 and another along dimension 1, joined into every pair
        of their rows (floodsung/LearningToCompare_FSL's relation pairs: every
        query feature beside every class feature), a side also read through a
        name's value (``pairwise_helpers``' axes, a ``transpose(0, 1)`` swapping
        them)."""
        if not call.args or not isinstance(call.args[0].value, (cst.Tuple, cst.List)):
            return False
        elements = call.args[0].value.elements
        axes = {self._pair_axis(e.value, 0) for e in elements}
        return {0, 1} <= axes

    def _pair_axis(self, expr: cst.BaseExpression, depth: int) -> int | None:
        """``_broadcast_axis`` of ``expr``, through a name (the value bound just
        before its use, or its only value) and ``transpose(0, 1)``."""
        if depth > _DEPTH:
            return None
        if isinstance(expr, cst.Name):
            key = self.index.key(expr)
            if key is None:
                return None
            value = self.reducer._reaching(key, expr)
            if value is None:
                values = [v for v in self.index.values.get(key, ()) if v is not None]
                value = values[0] if len(values) == 1 else None
            return self._pair_axis(value, depth + 1) if value is not None else None
        inner = _transposed(expr)
        if inner is not None:
            axis = self._pair_axis(inner, depth + 1)
            return None if axis is None else 1 - axis
        return _broadcast_axis(expr)

    def _callee_body(self, call: cst.Call) -> cst.CSTNode | None:
        """The body of this file's function ``call`` runs, or of the ``forward``
        of the local class whose instance it calls, or of the function an
        attribute holds (``self.similarity_fct(a, b)``, set in ``__init__`` from
        a parameter whose default is this file's ``cos_sim``)."""
        function = self.index.local_function(call.func)
        if function is not None:
            return function.body
        held = self._held_function(call)
        if held is not None:
            return held.body
        key = self.index.key(call.func)
        values = self.index.values.get(key, ()) if key is not None else ()
        classes = {
            self.index.local_class(v.func) for v in values if isinstance(v, cst.Call)
        }
        if len(classes) != 1 or None in classes:
            return None
        (cls,) = classes
        assert cls is not None
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == (
                "forward"
            ):
                return statement.body
        return None

    def _helper_pairwise(self, call: cst.Call) -> str | None:
        """A comparison of samples made in a helper module (the project view):
        by the function ``call`` runs, or the ``forward`` of the helper class
        whose instance it calls (``criterion = MultipleNegativesRankingLoss(m)``,
        then ``criterion(a, p)``)."""
        facts = [self.index.helper(call.func)]
        key = self.index.key(call.func)
        if key is not None and self.index.project is not None:
            # `loss_fn(out, y)` of a parameter every batch call hands an
            # instance of a helper class (`fit(..., loss_fn=OnlineTripletLoss(...))`)
            from ..project_callers import caller_model_class

            facts.append(caller_model_class(self.index, key))
        for value in self.index.values.get(key, ()) if key is not None else ():
            if isinstance(value, cst.Call):  # an instance of the class
                facts.append(self.index.helper(value.func))
            elif isinstance(value, (cst.Name, cst.Attribute)):  # the function
                facts.append(self.index.helper(value))
        for fact in facts:
            if fact is not None and fact.pairwise:
                return f"`{fact.pairwise}` in {fact.where}"
        return None

    def _held_function(self, call: cst.Call) -> cst.FunctionDef | None:
        func = call.func
        if not (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            return None
        cls = self.index.enclosing_class(call)
        init = next(
            (
                s
                for s in (cls.body.body if cls is not None else ())
                if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
            ),
            None,
        )
        if init is None:
            return None
        defaults = {
            p.name.value: p.default
            for p in (*init.params.params, *init.params.kwonly_params)
            if p.default is not None
        }
        for assign in findall(init, m.Assign()):
            for target in assign.targets:  # type: ignore[attr-defined]
                if not (
                    isinstance(target.target, cst.Attribute)
                    and target.target.attr.value == func.attr.value
                    and m.matches(target.target.value, m.Name("self"))
                ):
                    continue
                value = assign.value  # type: ignore[attr-defined]
                if isinstance(value, cst.Name) and value.value in defaults:
                    value = defaults[value.value]
                found = self.index.local_function(value)
                if found is not None:
                    return found
        return None


_EINSUM = frozenset({"torch.einsum"})
#: Functions that join tensors (the pairs of ``_Search._joined_pairs``).
_JOINS = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.stack"})


def _transposed(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor of ``torch.transpose(z, 0, 1)`` / ``z.transpose(0, 1)`` (its
    first two dimensions swapped), or None."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return None
    if expr.func.attr.value != "transpose":
        return None
    args = [a.value for a in expr.args if a.keyword is None]
    if m.matches(expr.func.value, m.Name("torch")):
        if len(args) != 3:
            return None
        tensor, dims = args[0], args[1:]
    else:
        tensor, dims = expr.func.value, args
    ints = sorted(d.value for d in dims if isinstance(d, cst.Integer))
    return tensor if len(dims) == 2 and ints == ["0", "1"] else None


def _rows_against_rows(call: cst.Call) -> bool:
    """``torch.einsum("id,jd->ij", q, k)``: two operands whose first indices
    differ and both stay in the output (every row of one against every row of
    the other)."""
    if len(call.args) != 3 or not isinstance(call.args[0].value, cst.SimpleString):
        return False
    equation = call.args[0].value.evaluated_value
    return isinstance(equation, str) and rows_against_rows(equation)


def _rows_transposed(expr: cst.BaseExpression) -> bool:
    """``z.t()``, ``z.T``, ``z.transpose(0, 1)``, ``z.permute(1, 0)``,
    ``torch.t(z)``, ``torch.transpose(z, 0, 1)`` of a value that is not an attribute (a layer's weight).
    """
    if isinstance(expr, cst.Attribute) and expr.attr.value == "T":
        return _local(expr.value)
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    method = expr.func.attr.value
    ints = [a.value.value for a in expr.args if isinstance(a.value, cst.Integer)]
    if method == "t" and not expr.args:
        return _local(expr.func.value)
    if method == "transpose" and len(expr.args) == 3:  # torch.transpose(z, 0, 1)
        return (
            m.matches(expr.func.value, m.Name("torch"))
            and sorted(ints) == ["0", "1"]
            and _local(expr.args[0].value)
        )
    if method in ("transpose", "permute") and sorted(ints) == ["0", "1"]:
        return len(expr.args) == 2 and _local(expr.func.value)
    if method == "t" and len(expr.args) == 1:  # torch.t(z)
        return m.matches(expr.func.value, m.Name("torch")) and _local(
            expr.args[0].value
        )
    return False


def _local(value: cst.BaseExpression) -> bool:
    """A tensor of the step (a name, a call's result), not ``self.weight``."""
    return not isinstance(value, cst.Attribute)


def _broadcast_rows(expr: cst.BaseExpression) -> bool:
    """``z.unsqueeze(0)`` or ``z[None, :]``: every row against every other."""
    if m.matches(
        expr,
        m.Call(
            func=m.Attribute(attr=m.Name("unsqueeze")), args=[m.Arg(m.Integer("0"))]
        ),
    ):
        return True
    return (
        isinstance(expr, cst.Subscript)
        and bool(expr.slice)
        and isinstance(expr.slice[0].slice, cst.Index)
        and m.matches(expr.slice[0].slice.value, m.Name("None"))
    )


#: Methods that broadcast a tensor to a shape without mixing its rows.
_EXPANSIONS = frozenset({"expand", "expand_as", "repeat"})


def _broadcast_axis(expr: cst.BaseExpression) -> int | None:
    """0 for ``b.unsqueeze(0)`` / ``b[None]``, 1 for ``a.unsqueeze(1)`` /
    ``a[:, None]`` (also under ``.expand(...)``); None otherwise."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _EXPANSIONS
    ):
        expr = expr.func.value
    if m.matches(
        expr,
        m.Call(
            func=m.Attribute(attr=m.Name("unsqueeze")),
            args=[m.Arg(m.Integer("0") | m.Integer("1"), keyword=None)],
        ),
    ):
        return int(expr.args[0].value.value)  # type: ignore[attr-defined]
    if not (isinstance(expr, cst.Subscript) and expr.slice):
        return None
    parts = [e.slice for e in expr.slice]
    nones = [
        isinstance(p, cst.Index) and m.matches(p.value, m.Name("None")) for p in parts
    ]
    if nones[0]:
        return 0
    first = parts[0]
    if (
        len(parts) >= 2
        and isinstance(first, cst.Slice)
        and first.lower is None
        and first.upper is None
        and first.step is None
        and nones[1]
    ):
        return 1
    return None


def handed_arguments(index: ModuleIndex, key: Key) -> list[cst.BaseExpression]:
    """The arguments the file's calls of a function pass for its parameter
    ``key`` (none where ``key`` is not a parameter of a function of the file)."""
    from .model_classes import _Tracer

    function = _Tracer(index)._parameter(key)
    if function is None:
        return []
    return [
        arg
        for call in index.call_sites(function)
        for k, arg in index.arguments(call)
        if k == key
    ]


def _ranks_batch(call: cst.Call, names: set[str]) -> bool:
    """``losses.topk(k)``, ``torch.sort(losses, descending=True)``,
    ``x.kthvalue(k, 0)``: a ranking over the default or the first dimension (the
    batch's, for the per-sample losses a hard-example miner ranks); ``out.topk(5,
    1)`` (classes) is not one."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in _RANKINGS:
        method, shift = call.func.attr.value, 0
        if any(n.startswith(("torch.", "numpy.")) for n in names):
            # torch.topk(input, k, dim), np.argsort(a, axis): the input first
            shift = 1
        elif not names and m.matches(call.func.value, m.Name("torch") | m.Name("np")):
            shift = 1
    else:
        return False
    where = _RANKINGS[method]
    if where is None:
        return True  # msort: always the first dimension
    positional = [a.value for a in call.args if a.keyword is None]
    dims = [
        a.value
        for a in call.args
        if a.keyword is not None and a.keyword.value in ("dim", "axis")
    ]
    if not dims and len(positional) > where + shift:
        dims = [positional[where + shift]]
    return not dims or m.matches(dims[0], m.Integer("0"))
