"""Whether a tensor operation in a model's code works along dimension 0, the
batch's (AM037's ``batch_mixing_forward``): a reduction's ``dim`` argument
over it, a roll or flip that moves samples along it, a matrix picked by the
same index on its rows and columns, and the receivers whose dimension 0 is
not the batch's (the model's own tensors, values stacked along a new first
dimension, a record a loop walks)."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from . import python_ast
from .batch_mixing_models import record_values


def paired_index(
    node: cst.Subscript, qualnames: Callable[[cst.CSTNode], set[str]]
) -> cst.BaseExpression | None:
    """The index ``i`` when ``node`` picks the rows and the columns of a matrix by
    the same index: ``adj[i][:, i]``, ``adj[i, :][:, i]``, ``adj[i[:, None], i]``,
    ``adj[np.ix_(i, i)]``; None otherwise."""
    outer = [e.slice for e in node.slice]
    if len(outer) == 1 and isinstance(outer[0], cst.Index):
        picked = outer[0].value
        if (
            isinstance(picked, cst.Call)
            and qualnames(picked.func) & {"numpy.ix_"}
            and len(picked.args) == 2
            and picked.args[0].value.deep_equals(picked.args[1].value)
        ):
            return picked.args[0].value
        return None
    if len(outer) != 2 or not isinstance(outer[1], cst.Index):
        return None
    columns = outer[1].value
    first = outer[0]
    if isinstance(first, cst.Index):  # `adj[i[:, None], i]`
        rows = first.value
        if (
            isinstance(rows, cst.Subscript)
            and rows.value.deep_equals(columns)
            and len(rows.slice) == 2
            and full_slice(rows.slice[0].slice)
            and m.matches(rows.slice[1].slice, m.Index(value=m.Name("None")))
        ):
            return columns
        return None
    if not full_slice(first) or not isinstance(node.value, cst.Subscript):
        return None
    inner = [e.slice for e in node.value.slice]  # `adj[i]` or `adj[i, :]`
    if not inner or not isinstance(inner[0], cst.Index):
        return None
    if not all(full_slice(s) for s in inner[1:]):
        return None
    return columns if inner[0].value.deep_equals(columns) else None


def moving_samples(
    call: cst.Call,
    qualnames: Callable[[cst.CSTNode], set[str]],
    dim_values: Callable[[cst.BaseExpression], list[int] | None],
) -> tuple[cst.BaseExpression, str] | None:
    """The tensor ``call`` may move along dimension 0, and on what condition
    (empty: it does): ``torch.roll(x, n)`` or ``x.roll(n)`` without dims (the
    flattened tensor rolls across its rows), or with dims holding 0;
    ``torch.flip(x, [0])`` or ``x.flip(0)``; a negative dimension ``-k``
    (dimension 0 of a ``k``-dimensional tensor: ``dims=-4`` of a batch of
    images), or one whose value cannot be read from the code (``dims=d`` with
    ``d`` a parameter or an option), which cannot be proven not the batch's.
    None for anything else."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("roll", "flip"):
        return None
    name = func.attr.value
    function_form = bool(qualnames(func) & {f"torch.{name}"})
    if function_form:
        if not call.args or call.args[0].star:
            return None
        receiver, rest = call.args[0].value, call.args[1:]
    elif qualnames(func.value) & {"torch"}:
        return None
    else:
        receiver, rest = func.value, call.args
    dims = None
    positional = []
    for arg in rest:
        if arg.star:
            return None
        if arg.keyword is None:
            positional.append(arg.value)
        elif arg.keyword.value in ("dims", "dim"):
            dims = arg.value
    if name == "roll":
        if dims is None and len(positional) > 1:
            dims = positional[1]
        if dims is None:
            return receiver, ""  # no dims: rolls the flattened tensor
    elif dims is None and positional:
        dims = (
            positional[0]
            if len(positional) == 1
            else cst.List([cst.Element(p) for p in positional])
        )
    if dims is None:
        return None
    values = dim_values(dims)
    shown = cst.Module([]).code_for_node(dims)
    if values is None:
        return receiver, (
            f"; the dimension `{shown}` cannot be read from the code, so it "
            "cannot be proven not to be the batch's (skip this if it never is)"
        )
    if 0 in values:
        return receiver, ""
    negative = sorted({-v for v in values if v < 0})
    if not negative:
        return None
    sizes = " or ".join(str(k) for k in negative)
    return receiver, (
        f"; the dimension `{shown}` counts from the end: it is dimension 0 of a "
        f"tensor with {sizes} dimensions (a batch of images has 4), so it "
        "cannot be proven not to be the batch's (skip this if the tensor has "
        "more dimensions)"
    )


def full_slice(part: cst.BaseSlice) -> bool:
    """``:`` (every row or column)."""
    return (
        isinstance(part, cst.Slice)
        and part.lower is None
        and part.upper is None
        and part.step is None
    )


def dim_argument(call: cst.Call, position: int) -> cst.BaseExpression | None:
    """The ``dim`` argument (``axis`` too): by keyword, or the
    ``position``-th positional one."""
    positional = []
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value in ("dim", "axis"):
                return arg.value
            continue
        positional.append(arg.value)
    return positional[position] if len(positional) > position else None


def over_first(dim: cst.BaseExpression | None) -> bool:
    """Is ``dim`` dimension 0, or a tuple or list of dimensions with 0 in it
    (``x.mean(dim=(0, 2))``, a hand-written BatchNorm's)?"""
    if dim is None:
        return False
    if isinstance(dim, (cst.Tuple, cst.List)):
        return any(over_first(e.value) for e in dim.elements)
    return m.matches(dim, m.Integer("0"))


def of_a_record(receiver: cst.BaseExpression, method: cst.FunctionDef) -> bool:
    """Is ``receiver`` a name bound from a record a loop of ``method`` walks
    (``record_values``: ``iou`` of ``for t in targets: iou = box_iou(t["boxes"],
    anchors)``)? Its dimension 0 is the record's, not the batch's."""
    if not isinstance(receiver, cst.Name):
        return False
    code = textwrap.dedent(cst.Module(body=[]).code_for_node(method))
    try:
        tree = python_ast.parse(code)
    except SyntaxError:
        return False
    return receiver.value in record_values(ast.walk(tree))


def not_the_batch(
    receiver: cst.BaseExpression, qualnames: Callable[[cst.CSTNode], set[str]]
) -> bool:
    """What is reduced is not the batch: a tensor of the model itself
    (``self.weight.norm(dim=0)``), or values stacked along a new first
    dimension (``torch.stack([a, b]).sum(0)``)."""
    root = receiver
    while isinstance(root, cst.Attribute):  # `self.body.weight`
        root = root.value
    if root is not receiver and m.matches(root, m.Name("self")):
        return True
    return isinstance(receiver, cst.Call) and bool(
        qualnames(receiver.func) & {"torch.stack", "torch.cat"}
    )
