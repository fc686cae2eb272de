"""A local module's metric helper whose return is a sum over the rows it is
handed times a constant over their count (``metrics.row_scaled`` for a function
of another file): the ImageNet example's ``accuracy(output, target, topk)``
returning ``res`` with ``res.append(correct_k.mul_(100.0 / batch_size))`` and
``batch_size = target.size(0)``, in metrics.py.

``HelperFact.row_scaled`` records how: the parameter the count is read off, its
position, the count as the function writes it (``target.size(0)``), whether it
returns a list of such values, and where it divides a number by the count. The
calling file (``metrics.row_scaled._returned_count``) writes the count at the
use with the argument it hands that parameter, and weights the value by it
(``accel.global_loss(acc1[0], count=target.size(0))``), as it does for a
function of its own file.

Read as ``metrics.row_scaled`` reads one: every ``return`` gives the value, a
list display or comprehension of them, or a list ``res = []`` that one
``res.append(v)`` fills; the value is constants times one full sum
(``x.sum()``, or ``.sum(0)`` of a flattened ``c.reshape(-1)``) of a tensor
built from the parameters only (``project_batch_kinds``), over one count
(``P.size(0)``, ``P.shape[0]``, ``len(P)``) of a parameter ``P`` the function
never assigns. Static only: ``ast``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from .project_batch_kinds import BatchReader, own_nodes, reader_of

#: Tensor methods that multiply or divide by their one argument (also
#: ``metrics.row_scaled``'s).
_MULTIPLYING = frozenset({"mul", "mul_", "multiply"})
_DIVIDING = frozenset({"div", "div_", "divide", "true_divide", "true_divide_"})
#: Tensor methods that sum a tensor's elements, and casts that keep its value.
_SUMS = frozenset({"sum", "count_nonzero"})
_CASTS = frozenset({"float", "double", "detach", "cpu"})


@dataclass(frozen=True)
class RowScaledReturn:
    """How a helper's return is scaled by its rows' count (module docstring)."""

    parameter: str
    position: int
    #: The count as the function writes it: ``target.size(0)``.
    count: str
    #: It returns a list of such values (``acc1, acc5 = accuracy(...)``).
    listed: bool
    #: Where it divides a number by the count (``100.0 / batch_size``), or "".
    division: str = ""


def row_scaled_return(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    dotted: Callable[[ast.expr], str],
) -> RowScaledReturn | None:
    returns = [n for n in own_nodes(function) if isinstance(n, ast.Return)]
    if not returns or any(r.value is None for r in returns):
        return None
    reader = reader_of(function, dotted)
    if reader is None:
        return None
    counts: set[tuple[str, str]] = set()
    listed: set[bool] = set()
    divisions: list[str] = []
    for returned in returns:
        items, is_list = _items(function, returned.value)  # type: ignore[arg-type]
        if not items:
            return None
        listed.add(is_list)
        for item in items:
            found = _scaled(reader, item)
            if found is None:
                return None
            counts.add(found[:2])
            if found[2]:
                divisions.append(found[2])
    if len(counts) != 1 or len(listed) != 1:
        return None
    parameter, count = counts.pop()
    arguments = function.args
    positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    position = positional.index(parameter) if parameter in positional else -1
    division = divisions[0] if divisions else ""
    return RowScaledReturn(parameter, position, count, listed.pop(), division)


def _items(function: ast.AST, returned: ast.expr) -> tuple[list[ast.expr], bool]:
    """The values a return hands back, and whether as a list."""
    if isinstance(returned, ast.ListComp):
        return [returned.elt], True
    if isinstance(returned, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in returned.elts):
            return [], False
        return list(returned.elts), True
    if not isinstance(returned, ast.Name):
        return [returned], False
    name = returned.id
    starts = [
        n.value
        for n in own_nodes(function)
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
    ]
    appends = [
        n
        for n in own_nodes(function)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "append"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == name
    ]
    uses = [n for n in own_nodes(function) if isinstance(n, ast.Name) and n.id == name]
    # `res = []`, one `res.append(v)`, `return res`: nothing else touches it
    if (
        len(starts) == 1
        and isinstance(starts[0], ast.List)
        and not starts[0].elts
        and len(appends) == 1
        and len(appends[0].args) == 1
        and not appends[0].keywords
        and len(uses) == 3
    ):
        return [appends[0].args[0]], True
    return [returned], False


def _scaled(reader: BatchReader, item: ast.expr) -> tuple[str, str, str] | None:
    """(parameter, count as written, division) of one returned value."""
    parts = _factors(item, 0)
    if parts is None:
        return None
    numerators, divisors = parts
    sums = [f for f in numerators if not _constant(f)]
    counts = [f for f in divisors if not _constant(f)]
    if len(sums) != 1 or len(counts) != 1:
        return None
    if not _full_sum(reader, sums[0], 0):
        return None
    counted = _count(reader, counts[0], 0)
    if counted is None:
        return None
    division = ""
    for node in ast.walk(item):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and node.right is counts[0]
            and _constant(node.left)
        ):
            division = ast.unparse(node)
    return counted[0], counted[1], division


def _factors(
    expr: ast.expr, depth: int
) -> tuple[list[ast.expr], list[ast.expr]] | None:
    if depth > 6:
        return None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        left, right = _factors(expr.left, depth + 1), _factors(expr.right, depth + 1)
        divide = isinstance(expr.op, ast.Div)
    elif (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _MULTIPLYING | _DIVIDING
        and len(expr.args) == 1
        and not expr.keywords
        and not isinstance(expr.args[0], ast.Starred)
    ):
        left = _factors(expr.func.value, depth + 1)
        right = _factors(expr.args[0], depth + 1)
        divide = expr.func.attr in _DIVIDING
    else:
        return [expr], []
    if left is None or right is None:
        return None
    if divide:
        return left[0] + right[1], left[1] + right[0]
    return left[0] + right[0], left[1] + right[1]


def _constant(expr: ast.expr) -> bool:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _constant(expr.operand)
    return isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float))


def _full_sum(reader: BatchReader, expr: ast.expr, depth: int) -> bool:
    """A tensor built from the parameters, summed over all its elements."""
    if depth > 4:
        return False
    if isinstance(expr, ast.Name):
        values = reader.assigned.get(expr.id, [])
        return (
            len(values) == 1
            and values[0] is not None
            and _full_sum(reader, values[0], depth + 1)
        )
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return False
    method, receiver = expr.func.attr, expr.func.value
    if method in _CASTS and not expr.args and not expr.keywords:
        return _full_sum(reader, receiver, depth + 1)
    if method not in _SUMS or not reader.batch(receiver, 0):
        return False
    dims = [*expr.args, *(k.value for k in expr.keywords if k.arg in ("dim", "axis"))]
    others = [k for k in expr.keywords if k.arg not in ("dim", "axis", "keepdim")]
    if others or any(isinstance(a, ast.Starred) for a in expr.args):
        return False
    if not dims:
        return True
    return (
        len(dims) == 1
        and isinstance(dims[0], ast.Constant)
        and dims[0].value == 0
        and _flattened(receiver)
    )


def _flattened(expr: ast.expr) -> bool:
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in _CASTS | {"contiguous"}
        and not expr.args
    ):
        expr = expr.func.value
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return False
    if expr.func.attr == "flatten":
        return not expr.args and not expr.keywords
    minus_one = (
        len(expr.args) == 1
        and isinstance(expr.args[0], ast.UnaryOp)
        and isinstance(expr.args[0].op, ast.USub)
        and isinstance(expr.args[0].operand, ast.Constant)
        and expr.args[0].operand.value == 1
    )
    return expr.func.attr in ("reshape", "view") and minus_one and not expr.keywords


def _count(reader: BatchReader, expr: ast.expr, depth: int) -> tuple[str, str] | None:
    """(parameter, the count as written) for ``P.size(0)``, ``P.shape[0]``,
    ``len(P)``, or a local assigned one of them once."""
    if depth > 3:
        return None
    if isinstance(expr, ast.Name):
        values = reader.assigned.get(expr.id, [])
        if len(values) != 1 or values[0] is None:
            return None
        return _count(reader, values[0], depth + 1)
    inner: ast.expr | None = None
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "size"
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Constant)
        and expr.args[0].value == 0
        and not expr.keywords
    ):
        inner = expr.func.value
    elif (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Attribute)
        and expr.value.attr == "shape"
        and isinstance(expr.slice, ast.Constant)
        and expr.slice.value == 0
    ):
        inner = expr.value.value
    elif (
        isinstance(expr, ast.Call)
        and reader.dotted(expr.func) == "builtins.len"
        and len(expr.args) == 1
    ):
        inner = expr.args[0]
    if isinstance(inner, ast.Name) and inner.id in reader.parameters:
        return inner.id, ast.unparse(expr)
    return None
