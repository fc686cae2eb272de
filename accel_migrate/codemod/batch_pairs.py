"""Rows of a model's batch broadcast against rows of the same batch, in a
``forward`` (or a method it calls): AM037's side of ``reduction/pairwise.py``.

YannDubs/disentangling-vae routes rtqichen/beta-tcvae's minibatch stratified
sampling through the model's ``forward``: ``log_density(zs.view(B, 1, D),
mu.view(1, B, D), logvar.view(1, B, D))``, then a logsumexp over dimension 1,
estimates each sample's q(z) against every sample of the batch. The loss the
forward returns is then a function of the whole batch; after migration each
process compares only its share's samples with each other. The loss-side
search (``reduction/pairwise.py``) does not enter a model's ``forward``.

A pair is two operands of one arithmetic operation (``-``, ``+``, ``*``,
``/``) or two arguments of one call, one broadcast along a new dimension 1
(``a.unsqueeze(1)``, ``a[:, None]``, ``a.view(B, 1, D)``) and the other along
a new dimension 0 (``b.unsqueeze(0)``, ``b[None]``, ``b.view(1, B, D)``),
both computed from the method's arguments (``batch_names``): a distance of
the batch to the model's own tensors (``x.unsqueeze(1) -
self.centers.unsqueeze(0)``: prototypes, centres), or to a value built from
none of them (``torch.arange(x.size(1)).unsqueeze(0)``), is not one. The
recognisers of ``unsqueeze`` and ``None`` spellings are ``pairwise_helpers``'s
(and ``reduction/pairwise.py``'s for the rule's own file); ``view`` and
``reshape`` are read here. Static only.
"""

from __future__ import annotations

import ast
import textwrap

from . import python_ast
from .pairwise_helpers import _broadcast_axis

#: Reads of a tensor that take no value of it (its shape, device, dtype).
_META_ATTRIBUTES = frozenset({"shape", "device", "dtype", "ndim", "is_cuda"})
_META_METHODS = frozenset({"size", "dim", "numel", "type", "get_device"})
_PAIRED_OPERATORS = (ast.Sub, ast.Add, ast.Mult, ast.Div)


def batch_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """The method's arguments (not ``self``) and the names its body binds from
    a value of them (``mu, logvar = self.encode(x)``; not ``n = x.size(0)``)."""
    arguments = function.args
    names = {
        a.arg
        for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
        if a.arg not in ("self", "cls")
    }
    assignments = [
        n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AugAssign))
    ]
    changed = True
    while changed:
        changed = False
        for node in assignments:
            if node.value is None or not reads_values(node.value, names):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id not in names:
                        names.add(name.id)
                        changed = True
    return frozenset(names)


def reads_values(expr: ast.AST, names: frozenset[str] | set[str]) -> bool:
    """Does ``expr`` read a value of one of ``names`` (not only its shape:
    ``x.size(0)``, ``x.shape``, ``x.device``, ``len(x)``)?"""
    if isinstance(expr, ast.Attribute) and expr.attr in _META_ATTRIBUTES:
        return False
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in _META_METHODS:
            return any(reads_values(a, names) for a in expr.args)
        if isinstance(func, ast.Name) and func.id == "len":
            return False
    if isinstance(expr, ast.Name):
        return expr.id in names
    return any(reads_values(c, names) for c in ast.iter_child_nodes(expr))


def view_axis(method: str, args: list[object], is_one: object) -> int | None:
    """0 for ``b.view(1, B, D)``, 1 for ``a.view(B, 1, D)`` (``reshape`` too):
    the shape's first or second entry the integer 1 and the other not;
    ``is_one`` tells an argument that is the integer 1."""
    if method not in ("view", "reshape") or len(args) < 2:
        return None
    first, second = is_one(args[0]), is_one(args[1])  # type: ignore[operator]
    if first and not second:
        return 0
    if second and not first:
        return 1
    return None


def _axis(expr: ast.expr) -> int | None:
    axis = _broadcast_axis(expr)
    if axis is not None:
        return axis
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in ("expand", "expand_as", "repeat")
    ):
        expr = expr.func.value
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return None
    return view_axis(
        expr.func.attr,
        list(expr.args),
        lambda a: isinstance(a, ast.Constant) and a.value == 1 and a.value is not True,
    )


def paired_rows(node: ast.AST, names: frozenset[str]) -> str:
    """The spelling of the two operands of ``node`` that set rows of the batch
    against rows of the batch (``a.unsqueeze(1) - b.unsqueeze(0)``,
    ``f(z.view(B, 1, D), mu.view(1, B, D))``), both reading ``names``; ""."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, _PAIRED_OPERATORS):
        operands = [node.left, node.right]
    elif isinstance(node, ast.Call):
        operands = [a for a in node.args if not isinstance(a, ast.Starred)]
        operands += [k.value for k in node.keywords if k.arg is not None]
    else:
        return ""
    axes = [(_axis(o), o) for o in operands]
    rows = [o for axis, o in axes if axis == 1 and reads_values(o, names)]
    columns = [o for axis, o in axes if axis == 0 and reads_values(o, names)]
    if not rows or not columns:
        return ""
    return f"`{ast.unparse(rows[0])}` against `{ast.unparse(columns[0])}`"


def method_batch_names(source: str) -> frozenset[str]:
    """``batch_names`` of the method whose source is ``source`` (indented as
    in its class); none where it does not parse."""
    try:
        tree = python_ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return frozenset()
    function = tree.body[0] if tree.body else None
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return frozenset()
    return batch_names(function)
