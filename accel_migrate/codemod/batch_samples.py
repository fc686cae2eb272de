"""Tensors with one row per sample of the current batch share, in its order.

After ``accel.prepare_dataloader`` each process holds a contiguous slice of every
global batch (``runtime.data.chunk_bounds``: the first ranks take the extra rows,
no padding, an empty share where a last batch is shorter than the world). A
tensor that keeps one row per sample of that slice, in order, gathered in rank
order (``accel.gather``, a concatenation along dim 0) is the tensor the original
script computed from the whole batch. AM044 asks this module which saved values
are such tensors.

Proven per sample (reading the migrated tree of the rule's pass):

- a variable the ``for`` over a prepared loader binds (the batch or its parts),
  and its items by key (``imgs["lr"]``);
- the rows of a draw for the global batch (``accel.batch_draw(...)``, AM034's);
- a method or function that keeps the rows of a per-sample tensor: ``.data``,
  ``.detach()``, ``.cpu()``, ``.to(...)``, ``.type(...)``, ``.float()``,
  ``Variable(x)``, ``Tensor(x)`` (a ``torch`` tensor type, or a variable every
  value of which is one), ``torch.from_numpy``, ``F.interpolate``, elementwise
  activations, and arithmetic with a number (``0.5 * x + 0.5``);
- ``torch.cat`` of per-sample tensors along a dimension other than 0;
- a prepared model's output (``generator(z)``, every value of ``generator``
  being ``accel.prepare_model(...)``, or the same model moved: ``generator =
  generator.cuda()``) on a per-sample first argument: a model
  maps each sample's row to its output's row, as DDP itself assumes;
- a variable every assignment of which is one of these.

Anything else (a slice of rows, a mean, a tuple unpacked from a model's output, a
parameter) is not proven, and the rule that asks reports rather than gathers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .names import TORCH_CONCATENATIONS
from .patterns import self_attribute, strip_methods

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

_DEPTH = 24
#: Methods that return a tensor with the same rows (possibly another dtype or device).
ROW_METHODS = frozenset(
    {
        "detach",
        "cpu",
        "cuda",
        "to",
        "type",
        "float",
        "double",
        "half",
        "clone",
        "contiguous",
        "sigmoid",
        "tanh",
        "clamp",
        "abs",
    }
)
#: Functions whose first argument's rows are the result's rows.
_ROW_FUNCTIONS = frozenset(
    {
        "torch.autograd.Variable",
        "torch.autograd.variable.Variable",
        "torch.from_numpy",
        "torch.tensor",
        "torch.as_tensor",
        "torch.Tensor",
        "torch.FloatTensor",
        "torch.cuda.FloatTensor",
        "torch.DoubleTensor",
        "torch.cuda.DoubleTensor",
        "torch.nn.functional.interpolate",
        "torch.sigmoid",
        "torch.tanh",
        "torch.clamp",
        "torch.abs",
    }
)
_MODEL_METHODS = frozenset({"to", "cuda", "train", "eval"})


def per_sample(
    index: ModuleIndex,
    expr: cst.BaseExpression,
    batch: frozenset[Key],
    seen: frozenset[Key] = frozenset(),
    depth: int = 0,
) -> bool:
    """Has ``expr`` one row per sample of the batch share that the loop binding
    ``batch`` (its variables) holds, in the share's order?"""
    if depth > _DEPTH:
        return False
    deeper = depth + 1
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return per_sample(index, expr.value, batch, seen, deeper)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return _variable(index, expr, batch, seen, deeper)
    if isinstance(expr, cst.Subscript):
        return _keyed_item(expr) and per_sample(index, expr.value, batch, seen, deeper)
    if isinstance(expr, cst.BinaryOperation):
        return _with_number(index, expr, batch, seen, deeper)
    if not isinstance(expr, cst.Call):
        return False
    if index.is_runtime_call(expr, "batch_draw"):
        return True
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in ROW_METHODS:
        return per_sample(index, func.value, batch, seen, deeper)
    first = _first(expr)
    if first is None:
        return False
    names = index.qualnames(func)
    if names & TORCH_CONCATENATIONS:
        return _cat(index, expr, first, batch, seen, deeper)
    if names & _ROW_FUNCTIONS or _tensor_type(index, func) or _model(index, func):
        return per_sample(index, first, batch, seen, deeper)
    return False


def _variable(
    index: ModuleIndex,
    expr: cst.Name | cst.Attribute,
    batch: frozenset[Key],
    seen: frozenset[Key],
    depth: int,
) -> bool:
    if isinstance(expr, cst.Attribute) and not self_attribute(expr):
        return False
    key = index.key(expr)
    if key is None:
        return False
    if key in batch:
        return True
    if key in seen:
        return True  # `x = interpolate(x)`: its other values decide
    values = index.values.get(key, [])
    if not values or any(v is None for v in values):
        return False
    inner = seen | {key}
    return all(per_sample(index, v, batch, inner, depth) for v in values)  # type: ignore[arg-type]


def _keyed_item(expr: cst.Subscript) -> bool:
    """``batch["lr"]``: an item of a dict batch by a constant key."""
    if len(expr.slice) != 1:
        return False
    element = expr.slice[0].slice
    return isinstance(element, cst.Index) and isinstance(
        element.value, (cst.SimpleString, cst.ConcatenatedString)
    )


def _with_number(
    index: ModuleIndex,
    expr: cst.BinaryOperation,
    batch: frozenset[Key],
    seen: frozenset[Key],
    depth: int,
) -> bool:
    numbers = (cst.Integer, cst.Float)
    if isinstance(expr.left, numbers):
        return per_sample(index, expr.right, batch, seen, depth)
    if isinstance(expr.right, numbers):
        return per_sample(index, expr.left, batch, seen, depth)
    if isinstance(expr.left, cst.BinaryOperation) and isinstance(expr.right, numbers):
        return per_sample(index, expr.left, batch, seen, depth)
    return False


def _first(call: cst.Call) -> cst.BaseExpression | None:
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    return call.args[0].value


def _cat(
    index: ModuleIndex,
    call: cst.Call,
    first: cst.BaseExpression,
    batch: frozenset[Key],
    seen: frozenset[Key],
    depth: int,
) -> bool:
    """``torch.cat((a, b), -1)``: joined along another dimension than the rows."""
    dim: cst.BaseExpression | None = None
    for position, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value in ("dim", "axis"):
            dim = arg.value
        elif arg.keyword is None and position == 1:
            dim = arg.value
    if dim is None or not _nonzero_integer(dim):
        return False
    if not isinstance(first, (cst.Tuple, cst.List)) or not first.elements:
        return False
    return all(
        not isinstance(e, cst.StarredElement)
        and per_sample(index, e.value, batch, seen, depth)
        for e in first.elements
    )


def row_joined_parts(
    index: ModuleIndex, expr: cst.BaseExpression, batch: frozenset[Key]
) -> list[cst.BaseExpression] | None:
    """``torch.cat((imgs, gen_imgs), 0)``: the parts joined along the rows, when
    each has one row per sample of the share (gathered one by one, in rank
    order, they are the original's parts; the joined tensor gathered whole would
    interleave the processes' parts), or None."""
    if (
        not isinstance(expr, cst.Call)
        or not index.qualnames(expr.func) & TORCH_CONCATENATIONS
    ):
        return None
    first = _first(expr)
    if not isinstance(first, (cst.Tuple, cst.List)) or not first.elements:
        return None
    for position, arg in enumerate(expr.args):
        if position == 0:
            continue
        if arg.star or position > 1:
            return None
        if arg.keyword is not None and arg.keyword.value not in ("dim", "axis"):
            return None
        if not (isinstance(arg.value, cst.Integer) and int(arg.value.value) == 0):
            return None
    parts = []
    for element in first.elements:
        if isinstance(element, cst.StarredElement):
            return None
        if not per_sample(index, element.value, batch):
            return None
        parts.append(element.value)
    return parts


def _nonzero_integer(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Integer):
        return int(expr.value) != 0
    return (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
    )


def _tensor_type(index: ModuleIndex, func: cst.BaseExpression) -> bool:
    """``Tensor(...)`` with ``Tensor = torch.cuda.FloatTensor if cuda else
    torch.FloatTensor`` (PyTorch-GAN's spelling)."""
    key = index.key(func) if isinstance(func, cst.Name) else None
    values = index.values.get(key, []) if key is not None else []
    if not values:
        return False
    for value in values:
        options = (
            [value.body, value.orelse] if isinstance(value, cst.IfExp) else [value]
        )
        for option in options:
            if option is None or not index.qualnames(option) & _ROW_FUNCTIONS:
                return False
    return True


def _model(index: ModuleIndex, func: cst.BaseExpression) -> bool:
    """A variable (or ``self.`` attribute) every value of which is a prepared model."""
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return False
    if isinstance(func, cst.Attribute) and not self_attribute(func):
        return False
    key = index.key(func)
    values = index.values.get(key, []) if key is not None else []
    prepared = False
    for value in values:
        if value is None:
            return False
        built = strip_methods(value, _MODEL_METHODS)
        if isinstance(built, (cst.Name, cst.Attribute)) and index.key(built) == key:
            continue  # `generator = generator.cuda()`: the same model
        if not index.is_runtime_call(built, "prepare_model"):
            return False
        prepared = True
    return prepared
