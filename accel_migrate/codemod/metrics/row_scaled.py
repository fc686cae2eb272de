"""Per-batch values that are a sum over this process's rows scaled by their count.

``correct.mul_(100.0 / batch_size)`` with ``batch_size = target.size(0)`` (the
ImageNet example's ``accuracy``) is a sum over the rows of this process's batch
(correct predictions), times a constant, over the count of those rows: a
percentage of the share's rows. The whole batch's is the same constant times
the global sum over the global count, which is each process's value weighted by
its count of rows: ``accel.global_loss(value, count=rows)``.

The value is found in the loop (``correct.mul(100.0 / n).item()``) or in what a
function of this file, or a local module's (``HelperFact.row_scaled``,
``project_row_scaled``), returns and the loop reads (``acc1, acc5 =
accuracy(output, target, topk=(1, 5))``; ``acc1[0]``; ``acc = accuracy(...)``,
``acc[0]``): a list grown by one ``res.append(...)``, a list comprehension, a
list display, or the value itself. The count must then be read off one of the
function's parameters (``target.size(0)``), which the call hands a variable of
the batch (``target``, ``target.data``) that no statement assigns or changes in
place between the call and the value's use (``reduction.placement``, as for a
loss's token count): the count is written there as ``target.size(0)``, the
same rows.

The sum must be of all a tensor's elements (``x.sum()``, or ``.sum(0)`` of a
flattened ``c[:k].reshape(-1)``), so that it is a tensor of one value whose
every item is the share's sum: ``c[:k].float().sum(0)`` of a 2-D ``c`` is a row
of per-sample counts, and ``acc1[0]`` one sample's. Only tensors are weighted
so (``accel.global_loss`` takes one), read as they are or with ``.item()``.

A number divided by the count (``100.0 / batch_size``, a Python division)
raises ZeroDivisionError on a process given no rows of a short last batch;
``RowScaled.division`` records it for the rule's finding. A tensor divided by
zero rows (``correct_k * 100.0 / batch_size``) is NaN, weighted by zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import bind_arguments
from ..batch_rows import counts_batch
from ..project_row_scaled import _CASTS, _DIVIDING, _MULTIPLYING, _SUMS
from ..reduction.placement import code, placement_blocker
from ..subtrees import findall
from .kinds import BatchKinds, inside, number_literal

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: Keywords that name the dimensions a sum is taken along.
_DIMS = frozenset({"dim", "axis"})


@dataclass(frozen=True)
class RowScaled:
    """A sum over this process's rows times a constant over their count."""

    #: The count of the rows, written so that it is read where the value is.
    count: cst.BaseExpression
    #: The value is ``<tensor>.item()``: the tensor is weighted, then read.
    item: bool
    #: Where the count divides a number (``100.0 / batch_size``), as written, else
    #: "": a process whose share of a short batch is empty raises there.
    division: str


def row_scaled(
    kinds: BatchKinds, value: cst.BaseExpression, loop: cst.For
) -> RowScaled | None:
    """The count ``value`` (a per-batch value read in ``loop``) is scaled by, if
    it is a sum over this process's rows times a constant over their count."""
    item = m.matches(value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[]))
    inner: cst.BaseExpression = value.func.value if item else value  # type: ignore[attr-defined]
    found = _scaled_count(kinds, inner, loop) or _returned_count(kinds, inner, loop)
    if found is None:
        return None
    return RowScaled(found[0], item, found[1])


def _scaled_count(
    kinds: BatchKinds, expr: cst.BaseExpression, context: cst.CSTNode
) -> tuple[cst.BaseExpression, str] | None:
    """The divisor of ``expr``, if it is a tensor sum over the batch's rows times
    constants over one count of the rows (read in ``context``), and where it
    divides a number (see ``RowScaled.division``)."""
    parts = _factors(expr)
    if parts is None:
        return None
    numerators, divisors = parts
    sums = [f for f in numerators if not number_literal(f)]
    counts = [f for f in divisors if not number_literal(f)]
    if len(sums) != 1 or len(counts) != 1:
        return None
    if not counts_batch(kinds.index, counts[0]):
        return None
    if kinds.kind(sums[0], context) != "sum":
        return None
    if not _full_sum(kinds.index, sums[0], context):
        return None
    return counts[0], _division(expr, counts[0])


def _factors(
    expr: cst.BaseExpression, depth: int = 0
) -> tuple[list[cst.BaseExpression], list[cst.BaseExpression]] | None:
    """``a * b / c``, ``a.mul_(b / c)``: the factors multiplied and divided by."""
    if depth > 6:
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, (cst.Multiply, cst.Divide)
    ):
        left = _factors(expr.left, depth + 1)
        right = _factors(expr.right, depth + 1)
        divide = isinstance(expr.operator, cst.Divide)
    elif (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _MULTIPLYING | _DIVIDING
        and len(expr.args) == 1
        and expr.args[0].keyword is None
        and not expr.args[0].star
    ):
        left = _factors(expr.func.value, depth + 1)
        right = _factors(expr.args[0].value, depth + 1)
        divide = expr.func.attr.value in _DIVIDING
    else:
        return [expr], []
    if left is None or right is None:
        return None
    if divide:
        return left[0] + right[1], left[1] + right[0]
    return left[0] + right[0], left[1] + right[1]


def _full_sum(
    index: ModuleIndex, expr: cst.BaseExpression, context: cst.CSTNode, depth: int = 0
) -> bool:
    """Is ``expr`` a tensor summed over all its elements (``x.sum()``,
    ``c[:k].reshape(-1).float().sum(0, keepdim=True)``, its cast, or a variable of
    the context that only such values are assigned)? A sum along one dimension
    (``c.sum(0)`` of a 2-D ``c``: a row of sums) is not: its items are not the
    whole share's."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method, receiver = expr.func.attr.value, expr.func.value
        if method in _CASTS and not expr.args:
            return _full_sum(index, receiver, context, depth)
        if method in _SUMS:
            dims = [
                a for a in expr.args if a.keyword is None or a.keyword.value in _DIMS
            ]
            if any(a.star for a in expr.args):
                return False
            if not dims:
                return True
            return (
                len(dims) == 1
                and m.matches(dims[0].value, m.Integer("0"))
                and _flattened(receiver)
            )
        return False
    key = index.key(expr) if isinstance(expr, cst.Name) and depth < 3 else None
    values = index.values.get(key, []) if key is not None else []
    return bool(values) and all(
        v is not None
        and inside(index, v, context)
        and _full_sum(index, v, context, depth + 1)
        for v in values
    )


def _flattened(expr: cst.BaseExpression) -> bool:
    """``c.reshape(-1)``, ``c.view(-1)``, ``c.flatten()`` (under casts): one dimension."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _CASTS | {"contiguous"}
        and not expr.args
    ):
        expr = expr.func.value
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    method = expr.func.attr.value
    if method == "flatten":
        return not expr.args
    minus_one = m.Arg(
        value=m.UnaryOperation(operator=m.Minus(), expression=m.Integer("1")),
        keyword=None,
    )
    return method in ("reshape", "view") and m.matches(expr, m.Call(args=[minus_one]))


def _division(expr: cst.BaseExpression, count: cst.BaseExpression) -> str:
    """``100.0 / batch_size`` where ``count`` divides a number in ``expr`` (it
    raises ZeroDivisionError where a process's share of a batch is empty), else
    "" (a tensor divided by zero rows is weighted by zero)."""
    for node in findall(expr, m.BinaryOperation(operator=m.Divide())):
        if node.right is count and number_literal(node.left):  # type: ignore[attr-defined]
            return code(node)
    return ""


# -- values returned by a function of this file ------------------------------------------
def _returned_count(
    kinds: BatchKinds, expr: cst.BaseExpression, loop: cst.For
) -> tuple[cst.BaseExpression, str] | None:
    """``acc1[0]`` / ``acc1`` after ``acc1, acc5 = accuracy(output, target, ...)``
    in ``loop``: the count the function scales by, written at the use, and
    where the function divides a number by it."""
    index = kinds.index
    subscripted = _item_of(expr)
    if subscripted:
        expr = expr.value  # type: ignore[attr-defined]
    key = index.key(expr) if isinstance(expr, cst.Name) else None
    if key is None:
        return None
    values = index.values.get(key, [])
    if len(values) != 1:
        return None
    readings: tuple[bool, ...]  # does the function return a list of such values?
    if values[0] is None:
        sources = index.unpacked.get(key, [])
        if len(sources) != 1 or not isinstance(sources[0][0], cst.Call):
            return None
        call, readings = sources[0][0], (True,)  # `acc1, acc5 = accuracy(...)`
    elif isinstance(values[0], cst.Call):
        # `acc = accuracy(out, y)`: `acc[0]` is an item of a list, or of a tensor
        call, readings = values[0], (False, True) if subscripted else (False,)
    elif _item_of(values[0]) and isinstance(values[0].value, cst.Call):  # type: ignore[attr-defined]
        call, readings = values[0].value, (True,)  # type: ignore[attr-defined]
    else:
        return None
    if not inside(index, call, loop):
        return None
    target = index.callee(call)
    if target is None or not index.local_function(call.func):
        return _helper_count(index, call, readings, expr)
    function, bound = target
    found = next(
        (f for f in (_function_count(kinds, function, r) for r in readings) if f),
        None,
    )
    if found is None:
        return None
    template, counted, divides = found
    argument = dict(bind_arguments(function, bound, call)).get(counted.value)
    if argument is None or placement_blocker(index, argument, call, expr) is not None:
        return None
    return _substituted(template, counted, argument), divides


def _helper_count(
    index: ModuleIndex,
    call: cst.Call,
    readings: tuple[bool, ...],
    use: cst.BaseExpression,
) -> tuple[cst.BaseExpression, str] | None:
    """``_returned_count`` for a metric helper of a local module
    (``HelperFact.row_scaled``, read in its module: ``project_row_scaled``)."""
    fact = index.helper(call.func)
    scaled = fact.row_scaled if fact is not None else None
    if scaled is None or scaled.listed not in readings:
        return None
    if any(a.star for a in call.args):
        return None
    argument = next(
        (
            a.value
            for a in call.args
            if a.keyword is not None and a.keyword.value == scaled.parameter
        ),
        None,
    )
    positional = [a for a in call.args if a.keyword is None]
    if argument is None and 0 <= scaled.position < len(positional):
        argument = positional[scaled.position].value
    if argument is None or placement_blocker(index, argument, call, use) is not None:
        return None
    try:
        template = cst.parse_expression(scaled.count)
    except cst.ParserSyntaxError:
        return None
    counted = next(
        (
            n
            for n in findall(template, m.Name(scaled.parameter))
            if isinstance(n, cst.Name)
        ),
        None,
    )
    if counted is None:
        return None
    return _substituted(template, counted, argument), scaled.division


def _item_of(expr: cst.BaseExpression) -> bool:
    """``v[0]``: one item of ``v``, at a constant position."""
    return (
        isinstance(expr, cst.Subscript)
        and len(expr.slice) == 1
        and isinstance(expr.slice[0].slice, cst.Index)
        and isinstance(expr.slice[0].slice.value, cst.Integer)
    )


def _function_count(
    kinds: BatchKinds, function: cst.FunctionDef, listed: bool
) -> tuple[cst.BaseExpression, cst.Name, str] | None:
    """What every return of ``function`` scales by: the count (as the function
    writes it, off a parameter), that parameter's name in it, and where a
    number is divided by it. ``listed``: the caller takes items of what it
    returns (a list of such values)."""
    index = kinds.index
    returns = [r.value for r in findall(function.body, m.Return())]  # type: ignore[attr-defined]
    if not returns or any(r is None for r in returns):
        return None
    found: set[str] = set()
    resolved: tuple[cst.BaseExpression, cst.Name] | None = None
    divides = ""
    for returned in returns:
        for item in (
            _returned_items(index, function, returned) if listed else [returned]
        ):
            if item is None:
                return None
            scaled = _scaled_count(kinds, item, function)
            resolved = _parameter_count(index, function, scaled[0]) if scaled else None
            if scaled is None or resolved is None:
                return None
            divides = divides or scaled[1]
            found.add(code(resolved[0]))
    if len(found) != 1 or resolved is None:
        return None
    return resolved[0], resolved[1], divides


def _returned_items(
    index: ModuleIndex, function: cst.FunctionDef, returned: cst.BaseExpression
) -> Iterator[cst.BaseExpression | None]:
    """The items of a returned list: a comprehension's element, a display's
    items, or what one ``res.append(v)`` adds to ``res = []`` (None: unknown)."""
    if isinstance(returned, cst.ListComp):
        yield returned.elt
        return
    if isinstance(returned, (cst.List, cst.Tuple)):
        for element in returned.elements:
            yield None if isinstance(element, cst.StarredElement) else element.value
        return
    key = index.key(returned) if isinstance(returned, cst.Name) else None
    if key is None or len(index.values.get(key, [])) != 1:
        yield None
        return
    start = index.values[key][0]
    appends = [
        c
        for c in findall(function.body, m.Call(func=m.Attribute(attr=m.Name("append"))))
        if index.key(c.func.value) == key  # type: ignore[attr-defined]
    ]
    uses = [n for n in findall(function.body, m.Name()) if index.key(n) == key]  # type: ignore[arg-type]
    # `res = []`, one `res.append(v)`, and `return res`: nothing else touches it
    if (
        not m.matches(start, m.List(elements=[]))
        or len(appends) != 1
        or len(appends[0].args) != 1  # type: ignore[attr-defined]
        or len(uses) != 3
    ):
        yield None
        return
    yield appends[0].args[0].value  # type: ignore[attr-defined]


def _parameter_count(
    index: ModuleIndex, function: cst.FunctionDef, count: cst.BaseExpression
) -> tuple[cst.BaseExpression, cst.Name] | None:
    """``batch_size`` (``= target.size(0)``) -> (``target.size(0)``, ``target``):
    the count off a parameter the function never assigns."""
    for _ in range(3):
        # (a rule module: importing it here would import every rule, and
        # metric_sums, which imports this module)
        from ..rules.sample_counters import counted_batch

        counted = counted_batch(count, index.qualnames)
        if counted is not None:
            key = index.key(counted)
            name = counted.value
            if key != index.function_scope_key(function, name) or index.values.get(
                key  # type: ignore[arg-type]
            ):
                return None
            return count, counted
        key = index.key(count) if isinstance(count, cst.Name) else None
        values = index.values.get(key, []) if key is not None else []
        if len(values) != 1 or values[0] is None:
            return None
        count = values[0]
    return None


def _substituted(
    template: cst.BaseExpression, counted: cst.Name, argument: cst.BaseExpression
) -> cst.BaseExpression:
    """``target.size(0)`` with its parameter ``target`` (``counted``) replaced by
    ``argument``."""
    replaced = template.deep_replace(counted, argument.deep_clone())
    assert isinstance(replaced, cst.BaseExpression)
    return replaced
