"""The inputs and targets of a loss call, as ``facts`` reads them: which rows of
the batch they select, whether they are the data of packed sequences, the number
of targets that are not ignored, and whether the file's targets may hold -100
(the default ``ignore_index``)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import libcst as cst
import libcst.matchers as m

from ..names import ALONG_DIM_CALLS
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


#: Methods that keep what a value is (shape, dtype, device, autograd).
_SAME_VALUE = frozenset(
    {
        "clone",
        "contiguous",
        "cpu",
        "cuda",
        "detach",
        "double",
        "flatten",
        "float",
        "half",
        "item",
        "reshape",
        "squeeze",
        "to",
        "type_as",
        "unsqueeze",
        "view",
        "view_as",
        "bfloat16",
    }
)


def not_ignored_count(
    target: cst.BaseExpression, ignore: cst.BaseExpression
) -> cst.Call:
    """``(target != ignore).sum()``: the number of targets a loss does not ignore."""
    return cst.Call(
        func=cst.Attribute(
            value=cst.Comparison(
                left=target,
                comparisons=[
                    cst.ComparisonTarget(operator=cst.NotEqual(), comparator=ignore)
                ],
                lpar=[cst.LeftParen()],
                rpar=[cst.RightParen()],
            ),
            attr=cst.Name("sum"),
        )
    )


def _selected_rows(index: ModuleIndex, call: cst.Call) -> cst.BaseExpression | None:
    """An input or target of a loss call that selects rows of the batch by a
    mask or by indices (``box[pos]`` with ``pos = labels > 0``,
    ``logits[labelled]``, ``x[idx]`` of ``idx = mask.nonzero()``,
    ``torch.masked_select(x, mask)``, ``x.masked_select(mask)``, or a name
    bound to one): its mean is over the selected rows."""
    for arg in call.args[:2] if all(a.keyword is None for a in call.args[:2]) else ():
        if _selecting(index, arg.value, 0):
            return arg.value
    return None


def _selecting(index: ModuleIndex, value: cst.BaseExpression, depth: int) -> bool:
    if isinstance(value, cst.Subscript):
        return selected_rows(index, value)
    if isinstance(value, cst.Call):
        func = value.func
        return (
            isinstance(func, cst.Attribute) and func.attr.value == "masked_select"
        ) or "torch.masked_select" in index.qualnames(func)
    if isinstance(value, cst.Name) and depth < 3:
        key = index.key(value)
        values = index.values.get(key, ()) if key is not None else ()
        return bool(values) and all(
            v is not None and _selecting(index, v, depth + 1) for v in values
        )
    return False


def selected_rows(index: ModuleIndex, value: cst.Subscript) -> bool:
    """Does ``value`` select rows of its tensor by a mask or indices
    (``loss[y != 0]``, ``x[pos]`` with ``pos = labels > 0``)?"""
    return (
        bool(value.slice)
        and isinstance(value.slice[0].slice, cst.Index)
        and _selection(index, value.slice[0].slice.value, 0)
    )


#: Calls that make a mask or the indices of a selection.
_SELECTIONS = frozenset(
    {"nonzero", "bool", "argwhere", "where", "logical_and", "logical_or", "logical_not"}
)


def _selection(index: ModuleIndex, expr: cst.BaseExpression, depth: int) -> bool:
    """Is ``expr`` a boolean mask or the indices of selected rows: a comparison,
    ``~mask``, ``a & b``, ``.nonzero()``/``.bool()``/``torch.where(cond)``, or
    a variable bound to one?"""
    if depth > 3:
        return False
    if isinstance(expr, cst.Comparison):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(
        expr.operator, cst.BitInvert
    ):
        return _selection(index, expr.expression, depth + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, (cst.BitAnd, cst.BitOr)
    ):
        return _selection(index, expr.left, depth + 1) or _selection(
            index, expr.right, depth + 1
        )
    if isinstance(expr, cst.Subscript):  # `mask.nonzero(as_tuple=True)[0]`
        return _selection(index, expr.value, depth + 1)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SELECTIONS:
            return True
        return any(
            q.rsplit(".", 1)[-1] in _SELECTIONS and q.startswith("torch.")
            for q in index.qualnames(func)
        )
    if isinstance(expr, cst.Name):
        key = index.key(expr)
        values = index.values.get(key, ()) if key is not None else ()
        return bool(values) and all(
            v is not None and _selection(index, v, depth + 1) for v in values
        )
    return False


def _targets(call: cst.Call) -> list[cst.BaseExpression]:
    """The target argument of a loss call (the second positional or ``target=``)."""
    return [a.value for a in call.args if a.keyword is None][1:2] + [
        a.value for a in call.args if a.keyword and a.keyword.value == "target"
    ]


_PACKERS = frozenset(
    {
        "torch.nn.utils.rnn.pack_padded_sequence",
        "torch.nn.utils.rnn.pack_sequence",
    }
)


def packed_sequence(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0
) -> bool:
    """Is ``expr`` the data of a PackedSequence (``pack_padded_sequence(...).data``,
    ``[0]`` of one, a variable set to one, a layer applied to one)?"""
    if depth > 4:
        return False
    if isinstance(expr, cst.Call):
        if index.qualnames(expr.func) & _PACKERS:
            return True
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SAME_VALUE:
            return packed_sequence(index, expr.func.value, depth + 1)
        # `head(out.data)`, `lstm(packed, hidden)`: a layer of packed rows (its
        # first argument) gives packed rows.
        first = [a.value for a in expr.args if a.keyword is None][:1]
        return bool(first) and packed_sequence(index, first[0], depth + 1)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return packed_sequence(index, expr.value, depth + 1)
    if isinstance(expr, cst.Subscript):
        return packed_sequence(index, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        key = index.key(expr)
        values = index.values.get(key, ()) if key is not None else ()
        return bool(values) and all(
            v is not None and packed_sequence(index, v, depth + 1) for v in values
        )
    return False


_DEFAULT_IGNORE_WRITERS = frozenset(
    {
        "DataCollatorForSeq2Seq",
        "DataCollatorForLanguageModeling",
        "DataCollatorForTokenClassification",
        "DataCollatorWithFlattening",
        "label_pad_token_id",
    }
)
_MINUS_100 = m.UnaryOperation(operator=m.Minus(), expression=m.Integer("100"))


def writes_default_ignore(index: ModuleIndex) -> bool:
    """Can the file's targets hold -100, the default ``ignore_index`` of
    ``cross_entropy``/``nll_loss``? It writes the literal, or uses a collator or
    setting that pads labels with it."""
    cached = _WRITES_DEFAULT_IGNORE.get(index)
    if cached is None:
        cached = bool(
            findall(
                index.module,
                _MINUS_100
                | m.Name(value=m.MatchIfTrue(_DEFAULT_IGNORE_WRITERS.__contains__)),
            )
        )
        _WRITES_DEFAULT_IGNORE[index] = cached
    return cached


#: Per module index (one per tree), computed once: a traversal of the module.
_WRITES_DEFAULT_IGNORE: WeakKeyDictionary[ModuleIndex, bool] = WeakKeyDictionary()


def at_least_2d(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``expr`` provably a tensor of two dimensions or more (else the code
    raises): ``F.log_softmax(x, dim=1)``, ``x.view(n, -1)``, ``x.unsqueeze(1)``,
    or a variable bound only to one of them?"""
    if depth > 3:
        return False
    if isinstance(expr, cst.Name):
        key = index.key(expr)
        values = index.values.get(key, ()) if key is not None else ()
        return bool(values) and all(
            v is not None and at_least_2d(index, v, depth + 1) for v in values
        )
    if not isinstance(expr, cst.Call) or any(a.star for a in expr.args):
        return False
    func = expr.func
    method = func.attr.value if isinstance(func, cst.Attribute) else ""
    names = {
        q.rsplit(".", 1)[-1] for q in index.qualnames(func) if q.startswith("torch.")
    }
    library = any(q.startswith(("torch.", "numpy.")) for q in index.qualnames(func))
    if method in ("view", "reshape") and not library and len(expr.args) >= 2:
        # `x.view(n, -1)`: one size per dimension (not `torch.reshape(x, (-1,))`,
        # whose two arguments are the tensor and one shape)
        return all(a.keyword is None for a in expr.args)
    positional = [a.value for a in expr.args if a.keyword is None]
    dims = [a.value for a in expr.args if a.keyword and a.keyword.value == "dim"]
    if names & ALONG_DIM_CALLS:  # `F.log_softmax(x, 1)`, `torch.softmax(x, dim=1)`
        return _positive(dims or positional[1:2])
    if method == "unsqueeze" or method in ALONG_DIM_CALLS:  # `x.log_softmax(1)`
        return _positive(dims or positional[:1])
    return False


def ranked_operand(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0
) -> bool:
    """Is the elementwise arithmetic ``expr`` provably of two dimensions or
    more: one of its operands is (``at_least_2d``; broadcasting keeps the
    larger rank), through ``-x``, ``a * b``, ``x ** 2``, ``x.pow(2)``,
    ``x.abs()``, and names bound only to such values?"""
    if depth > 4:
        return False
    if at_least_2d(index, expr):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return ranked_operand(index, expr.expression, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        return ranked_operand(index, expr.left, depth + 1) or ranked_operand(
            index, expr.right, depth + 1
        )
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in _ELEMENTWISE_METHODS:
            return ranked_operand(index, expr.func.value, depth + 1)
    if isinstance(expr, cst.Name):
        key = index.key(expr)
        values = index.values.get(key, ()) if key is not None else ()
        return bool(values) and all(
            v is not None and ranked_operand(index, v, depth + 1) for v in values
        )
    return False


def arithmetic(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``expr`` elementwise arithmetic written out (``(out - y) ** 2``,
    ``-x``, ``(a * b).abs()``, a name bound only to such), not a loss
    function's value (whose rank the loss facts read)?"""
    if depth > 4:
        return False
    if isinstance(expr, cst.UnaryOperation | cst.BinaryOperation):
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return expr.func.attr.value in _ELEMENTWISE_METHODS and arithmetic(
            index, expr.func.value, depth + 1
        )
    if isinstance(expr, cst.Name):
        key = index.key(expr)
        values = index.values.get(key, ()) if key is not None else ()
        return bool(values) and all(
            v is not None and arithmetic(index, v, depth + 1) for v in values
        )
    return False


#: Methods whose result has their receiver's shape.
_ELEMENTWISE_METHODS = frozenset(
    {"abs", "pow", "exp", "log", "sqrt", "clamp", "neg", "float", "double"}
    | {"detach", "contiguous", "sigmoid", "tanh", "relu", "square", "type_as"}
)


def _positive(values: list[cst.BaseExpression]) -> bool:
    """Is the one value a literal dimension >= 1 (a tensor of fewer dimensions
    raises)?"""
    return (
        len(values) == 1
        and isinstance(values[0], cst.Integer)
        and values[0].evaluated_value >= 1
    )
