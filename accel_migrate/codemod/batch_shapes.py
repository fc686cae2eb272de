"""AM025's shape finder (``rules/batch_size_shapes.py`` and its parts ask): which
calls take a shape (tensor methods such as ``view`` and ``new_zeros``, torch
factories such as ``torch.ones`` and ``torch.arange``), which methods keep a
tensor's rows, and the small readings the rule's findings share (one size, what
a reshape reshapes, a call's short spelling)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .batch_size_buffers import shape_args
from .batches import same_variable
from .patterns import strip_methods
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: Tensor methods whose arguments are a shape.
SHAPE_METHODS = frozenset(
    {"view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "new"}
)
RESHAPES = frozenset({"view", "reshape"})
#: torch functions whose leading arguments are a shape (or a length).
SHAPE_FUNCTIONS = frozenset(
    f"torch.{name}"
    for name in (
        "zeros",
        "eye",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "arange",
        "Tensor",
        "FloatTensor",
        "LongTensor",
        "cuda.FloatTensor",
        "cuda.LongTensor",
    )
)
#: Methods that keep a tensor's first dimension (a batch rebound by them is still
#: the batch).
KEEP_ROWS = frozenset(
    {
        "to",
        "cuda",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "long",
        "type",
        "contiguous",
        "detach",
        "clone",
        "requires_grad_",
    }
)


def shaped_by(
    index: ModuleIndex, function: cst.FunctionDef, parameter: str
) -> cst.Call | None:
    """A shape call in ``function`` with its parameter ``parameter`` among the
    sizes (``weight.new_zeros(1, bsz, nhid)``), or None."""
    for call in findall(function, m.Call()):
        func = call.func  # type: ignore[attr-defined]
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method not in SHAPE_METHODS and not (
            index.qualnames(func) & SHAPE_FUNCTIONS
        ):
            continue
        if any(
            m.matches(expr, m.Name(parameter))
            for _, expr in shape_args(call)  # type: ignore[arg-type]
        ):
            return call  # type: ignore[return-value]
    return None


def short_code(node: cst.CSTNode) -> str:
    text = cst.Module(body=[]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."


def same_size(
    index: ModuleIndex, a: cst.BaseExpression, b: cst.BaseExpression, strict: bool
) -> bool:
    """One variable (``same_variable``), or one integer literal (``64``)."""
    if isinstance(a, cst.Integer) and isinstance(b, cst.Integer):
        return a.evaluated_value == b.evaluated_value
    return same_variable(index, a, b, strict=strict)


def shape_receiver(call: cst.Call) -> cst.BaseExpression:
    """What ``call`` (``x.to(device).view(...)``) reshapes, less the calls that
    keep its rows."""
    return strip_methods(call.func.value, KEEP_ROWS)  # type: ignore[attr-defined]
