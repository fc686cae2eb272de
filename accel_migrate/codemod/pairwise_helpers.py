"""Comparisons of a batch's samples with each other in a helper module: the
project view's side of ``reduction/pairwise.py`` (read with ``ast``).

sentence-transformers' ``MultipleNegativesRankingLoss`` in a ``losses.py``:
``forward`` scores every anchor against every positive of the batch
(``self.similarity_fct(a, b)``, whose default ``cos_sim`` is ``torch.mm(a,
b.transpose(0, 1))``) and takes the batch's own pairs as the labels. The
script's ``loss = criterion(anchors, positives)`` is then no mean of per-sample
terms, and AM007 must say so (``HelperFact.pairwise``). The spellings read are
those ``pairwise.py`` reads in the file itself: a product with a transposed
local tensor (``torch.mm``, ``torch.matmul``, ``@``), ``torch.cdist``,
``torch.einsum("id,jd->ij", ...)``, a cosine similarity of ``unsqueeze(0)``
rows, rows picked by two index tensors and subtracted (an online triplet
loss's ``emb[triplets[:, 0]] - emb[triplets[:, 1]]``), and the difference of
rows broadcast against rows (``x.unsqueeze(1).expand(n, m, d) -
y.unsqueeze(0).expand(n, m, d)``, ``a[:, None] - b[None]``: the squared
Euclidean distances of the Prototypical Networks' ``euclidean_dist``, every
query against every prototype built from the batch's support rows; names read
through their one value in the function); into this module's functions it
calls and the function an attribute holds (``self.similarity_fct``, set in
``__init__`` from a parameter whose default is one). Static only.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .metrics.helper_ranking import _ast_ranks_batch
from .reaching_values import reaching_value

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

_DEPTH = 3
_PRODUCTS = frozenset({"torch.mm", "torch.matmul"})
_DISTANCES = frozenset({"torch.cdist", "torch.pdist", "torch.nn.functional.pdist"})
_SIMILARITIES = frozenset(
    {"torch.cosine_similarity", "torch.nn.functional.cosine_similarity"}
)


def pairwise_in(
    facts: HelperFacts,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    cls: ast.ClassDef | None = None,
    depth: int = 0,
    rankings: bool = False,
    held: frozenset[str] = frozenset(),
) -> str:
    """The spelling of a comparison of samples with each other that ``function``
    (a method of ``cls``, where given) makes, or "". With ``rankings``, a
    ranking of values over the batch counts too (``_ranked``). ``held``: the
    parameters of ``function`` its caller hands a tensor the module holds
    (``cosine_sim(input, self.weight)``: a product with them sets each sample
    against the held rows, not against the batch's other samples)."""
    for node in ast.walk(function):
        found = (
            ""
            if _against_held(node, held) or _distance_to_held(facts, node, function)
            else _compares(facts, node)
        )
        found = found or _broadcast_difference(node, function)
        if not found and rankings:
            found = _ranked(node)
        if found:
            return found
        if isinstance(node, ast.Call) and depth < _DEPTH:
            callee = _callee(facts, node, cls)
            if callee is not None and callee is not function:
                found = pairwise_in(
                    facts,
                    callee,
                    cls,
                    depth + 1,
                    rankings,
                    _held_parameters(node, callee),
                )
                if found:
                    return found
    return ""


def _held_parameters(
    call: ast.Call, callee: ast.FunctionDef | ast.AsyncFunctionDef
) -> frozenset[str]:
    """The parameters of ``callee`` that ``call`` hands a tensor the module holds
    (``_held``: ``self.weight``): CosFace's ``cosine_sim(input, self.weight)``."""
    positional = [a.arg for a in [*callee.args.posonlyargs, *callee.args.args]]
    if positional[:1] == ["self"] and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    found = {
        name
        for name, arg in zip(positional, call.args, strict=False)
        if not isinstance(arg, ast.Starred) and _held(arg)
    }
    found |= {k.arg for k in call.keywords if k.arg is not None and _held(k.value)}
    return frozenset(found)


def _against_held(node: ast.AST, held: frozenset[str]) -> bool:
    """A product (``torch.mm(x1, x2.t())``, ``x1 @ x2.T``) one of whose sides is
    a parameter in ``held``, transposed or not."""
    if not held:
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        sides = [node.left, node.right]
    elif isinstance(node, ast.Call) and len(node.args) == 2:
        sides = list(node.args)
    else:
        return False
    return any(_root_name(side) in held for side in sides)


def _root_name(expr: ast.expr) -> str:
    """The name under transposes and method calls (``x2`` of ``x2.t()``,
    ``x2.T``, ``x2.transpose(0, 1)``, ``torch.t(x2)``); "" otherwise."""
    while True:
        if isinstance(expr, ast.Attribute) and expr.attr == "T":
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            if isinstance(expr.func.value, ast.Name) and expr.func.value.id == "torch":
                if not expr.args:
                    return ""
                expr = expr.args[0]
            else:
                expr = expr.func.value
        else:
            break
    return expr.id if isinstance(expr, ast.Name) else ""


def _compares(facts: HelperFacts, node: ast.AST) -> str:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        paired = _rows_transposed(facts, node.right) and not _held(node.left)
        return ast.unparse(node) if paired else ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return ast.unparse(node) if _picked_rows_paired(node) else ""
    if not isinstance(node, ast.Call):
        return ""
    name = facts._dotted(node.func)
    args = node.args
    if name in _DISTANCES:
        return ast.unparse(node)
    if (
        name in _PRODUCTS
        and len(args) == 2
        and _rows_transposed(facts, args[1])
        and not _held(args[0])
    ):
        return ast.unparse(node)
    if name == "torch.einsum" and _rows_against_rows(args):
        return ast.unparse(node)
    if name in _SIMILARITIES and any(_unsqueezed_rows(a) for a in args):
        return ast.unparse(node)
    return ""


def _ranked(node: ast.AST) -> str:
    """A loss function that ranks its per-sample losses over the batch and keeps
    some by rank: Co-teaching's ``loss_coteaching`` (``np.argsort(loss_1.data)``,
    then the ``int(remember_rate * len(loss_1_sorted))`` smallest), online hard
    example mining's ``losses.topk(k)``. Over a sharded batch each process ranks
    and keeps its own share's samples, not the batch's. Read for loss functions
    only: a model's ``forward`` sorting its batch by length (for
    ``pack_padded_sequence``) ranks without changing any sample's loss."""
    if isinstance(node, ast.Call) and _ast_ranks_batch(node):
        return ast.unparse(node)
    return ""


#: Methods that broadcast a tensor to a shape without mixing its rows.
_EXPANSIONS = frozenset({"expand", "expand_as", "repeat"})


def _broadcast_difference(node: ast.AST, function: ast.AST) -> str:
    """``x.unsqueeze(1).expand(n, m, d) - y.unsqueeze(0).expand(n, m, d)`` (or
    ``a[:, None] - b[None]``), the sides also read through a name's one value
    where it is read (``x = x.unsqueeze(1)...`` then ``x - y``): every row of one
    tensor against every row of the other, as a distance matrix; the spelling
    with the values, or ""."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)):
        return ""
    sides = []
    for side in (node.left, node.right):
        if isinstance(side, ast.Name):
            side = reaching_value(function, side) or side
        sides.append(side)
    if {_broadcast_axis(sides[0]), _broadcast_axis(sides[1])} != {0, 1}:
        return ""
    return f"{ast.unparse(sides[0])} - {ast.unparse(sides[1])}"


def _broadcast_axis(expr: ast.expr) -> int | None:
    """0 for ``b.unsqueeze(0)`` / ``b[None]``, 1 for ``a.unsqueeze(1)`` /
    ``a[:, None]`` (also under ``.expand(...)``); None otherwise."""
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _EXPANSIONS
    ):
        expr = expr.func.value
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "unsqueeze"
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Constant)
        and expr.args[0].value in (0, 1)
        and not isinstance(expr.args[0].value, bool)
    ):
        return int(expr.args[0].value)
    if isinstance(expr, ast.Subscript):
        parts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        nones = [isinstance(p, ast.Constant) and p.value is None for p in parts]
        if nones[:1] == [True]:
            return 0
        if (
            len(parts) >= 2
            and isinstance(parts[0], ast.Slice)
            and parts[0].lower is None
            and parts[0].upper is None
            and nones[1]
        ):
            return 1
    return None


def _rows_transposed(facts: HelperFacts, expr: ast.expr) -> bool:
    """``z.t()``, ``z.T``, ``z.transpose(0, 1)``, ``torch.transpose(z, 0, 1)``
    of a value that is not an attribute (a layer's weight)."""
    if isinstance(expr, ast.Attribute) and expr.attr == "T":
        return not isinstance(expr.value, ast.Attribute)
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return False
    dims = sorted(a.value for a in expr.args if isinstance(a, ast.Constant))
    method, receiver = expr.func.attr, expr.func.value
    if facts._dotted(expr.func) in ("torch.transpose", "torch.t"):
        return (
            bool(expr.args)
            and not isinstance(expr.args[0], ast.Attribute)
            and (len(expr.args) == 1 or dims == [0, 1])
        )
    if isinstance(receiver, ast.Attribute):
        return False
    if method == "t" and not expr.args:
        return True
    return method in ("transpose", "permute") and len(expr.args) == 2 and dims == [0, 1]


def _distance_to_held(facts: HelperFacts, node: ast.AST, function: ast.AST) -> bool:
    """``torch.cdist(X, P)`` with ``P`` a tensor the module holds (read through
    its one value: Proxy-NCA's ``P = F.normalize(self.proxies) * self.scaling_p``):
    each sample against the held rows (proxies, centres), not against the
    batch's other samples."""
    if not isinstance(node, ast.Call) or facts._dotted(node.func) not in _DISTANCES:
        return False
    for arg in node.args[:2]:
        value = arg
        if isinstance(arg, ast.Name):
            value = reaching_value(function, arg) or arg
        if _held(value) or _held_inside(value):
            return True
    return False


def _held_inside(expr: ast.expr) -> bool:
    """``F.normalize(self.proxies, p=2, dim=-1) * s``: a held tensor through a
    module function's first argument (``F.normalize``) and scaling."""
    while True:
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
            expr = expr.left
        elif (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and isinstance(expr.func.value, ast.Name)
            and expr.args
            and not isinstance(expr.args[0], ast.Starred)
        ):
            expr = expr.args[0]
        else:
            return _held(expr)


def _held(expr: ast.expr) -> bool:
    """``self.m_list[None, :]``, ``self.centers``: a tensor the module holds (its
    margins, centers, a layer's weight), read through subscripts and method
    calls. A product of it with the batch's transposed rows (LDAM's
    ``torch.matmul(self.m_list[None, :], index_float.transpose(0, 1))``, each
    sample's own margin) sets each sample against the held rows, not against the
    batch's other samples."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            break
    return isinstance(expr, ast.Attribute)


def _picked_rows_paired(node: ast.BinOp) -> bool:
    """``emb[triplets[:, 0]] - emb[triplets[:, 1]]``: rows of one tensor picked
    by two index tensors and set against each other, as an online triplet or
    pair loss does with the (anchor, positive, negative) indices a miner chose
    over the batch. Not a slice (``x[:, 0] - x[:, 1]``), a constant
    (``x[0] - x[1]``) or the same index on both sides."""
    left, right = node.left, node.right
    if not (
        isinstance(left, ast.Subscript)
        and isinstance(right, ast.Subscript)
        and isinstance(left.value, ast.Name)
        and isinstance(right.value, ast.Name)
        and left.value.id == right.value.id
    ):
        return False
    picks = (left.slice, right.slice)
    if any(isinstance(p, (ast.Slice, ast.Tuple, ast.Constant)) for p in picks):
        return False
    return ast.unparse(picks[0]) != ast.unparse(picks[1])


def _rows_against_rows(args: list[ast.expr]) -> bool:
    if len(args) != 3 or not (
        isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)
    ):
        return False
    return rows_against_rows(args[0].value)


def rows_against_rows(equation: str) -> bool:
    """An einsum equation (``"id,jd->ij"``, spaces ignored) of two operands whose
    first indices differ and both stay in the output: every row of one against
    every row of the other (also ``reduction.pairwise``'s)."""
    equation = equation.replace(" ", "")
    if "->" not in equation:
        return False
    inputs, output = equation.split("->", 1)
    parts = inputs.split(",")
    if len(parts) != 2 or not all(parts):
        return False
    first, second = parts[0][0], parts[1][0]
    return first != second and first in output and second in output


def _unsqueezed_rows(expr: ast.expr) -> bool:
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "unsqueeze"
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Constant)
        and expr.args[0].value == 0
    )


def _callee(
    facts: HelperFacts, call: ast.Call, cls: ast.ClassDef | None
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """This module's function ``call`` runs, directly or through an attribute
    of ``cls`` that holds one."""
    func = call.func
    if isinstance(func, ast.Name):
        return facts.scan.functions.get(func.id)
    if not (
        cls is not None
        and isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    ):
        return None
    init = next(
        (
            s
            for s in cls.body
            if isinstance(s, ast.FunctionDef) and s.name == "__init__"
        ),
        None,
    )
    if init is None:
        return None
    arguments = init.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = dict(
        zip(
            [a.arg for a in positional[len(positional) - len(arguments.defaults) :]],
            arguments.defaults,
            strict=True,
        )
    )
    defaults.update(
        (a.arg, d)
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if d is not None
    )
    for node in ast.walk(init):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Name):
            continue
        for target in node.targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr == func.attr
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                value = defaults.get(node.value.id, node.value)
                if isinstance(value, ast.Name):
                    return facts.scan.functions.get(value.id)
    return None
