"""Matrix products that sum over the samples of a batch.

Barlow Twins' cross-correlation ``c = bn(z1).T @ bn(z2)`` (divided by the batch
size), a covariance ``x.t() @ x / (n - 1)``, VICReg's ``torch.mm(z.T, z)``, the
einsum ``"bi,bj->ij"``: the left operand is transposed over its first two
dimensions, so the product contracts dimension 0, the batch, into a matrix of
features against features. Like a ``.mean(dim=0)``, the result is a statistic
of the whole batch: after migration each process sums over its own share.
This is the other side of ``reduction.pairwise``'s ``z @ z.T`` (the right
operand transposed: every sample against every other).

Not a product with a transposed attribute (``self.weight.T @ x``: a layer's
weights) nor a transpose of other dimensions (``k.transpose(-2, -1)``).
Both ``ast`` (helper modules, the project view) and libcst (the file itself)
spellings are read here. Static only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import libcst as cst

#: ``torch.`` functions that multiply two matrices.
PRODUCTS = frozenset({"torch.mm", "torch.matmul"})


def contracts_batch_ast(node: ast.AST, dotted: Callable[[ast.expr], str]) -> str:
    """The spelling of ``node`` when it is a product over dimension 0 (``a.T @
    b``, ``torch.mm(a.t(), b)``, ``a.t().mm(b)``, ``torch.einsum("bi,bj->ij",
    a, b)``); "" otherwise. ``dotted`` names a function (``torch.mm``)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return ast.unparse(node) if _transposed_ast(node.left, dotted) else ""
    if not isinstance(node, ast.Call):
        return ""
    args = node.args
    name = dotted(node.func)
    if name in PRODUCTS and len(args) == 2 and _transposed_ast(args[0], dotted):
        return ast.unparse(node)
    if (
        isinstance(node.func, ast.Attribute)
        and node.func.attr in ("mm", "matmul")
        and name not in PRODUCTS
        and len(args) == 1
        and _transposed_ast(node.func.value, dotted)
    ):
        return ast.unparse(node)
    if (
        name == "torch.einsum"
        and len(args) == 3
        and isinstance(args[0], ast.Constant)
        and isinstance(args[0].value, str)
        and sums_first_index(args[0].value)
    ):
        return ast.unparse(node)
    return ""


def _transposed_ast(expr: ast.expr, dotted: Callable[[ast.expr], str]) -> bool:
    """``z.T``, ``z.t()``, ``z.transpose(0, 1)``, ``z.permute(1, 0)``,
    ``torch.t(z)``, ``torch.transpose(z, 0, 1)`` of a value that is not an
    attribute (``self.weight``)."""
    if isinstance(expr, ast.Attribute) and expr.attr == "T":
        return not isinstance(expr.value, ast.Attribute)
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return False
    dims = sorted(
        a.value
        for a in expr.args
        if isinstance(a, ast.Constant) and type(a.value) is int
    )
    if dotted(expr.func) in ("torch.transpose", "torch.t"):
        return (
            bool(expr.args)
            and not isinstance(expr.args[0], ast.Attribute)
            and (len(expr.args) == 1 or dims == [0, 1])
        )
    if isinstance(expr.func.value, ast.Attribute):
        return False
    if expr.func.attr == "t" and not expr.args:
        return True
    return (
        expr.func.attr in ("transpose", "permute")
        and len(expr.args) == 2
        and dims == [0, 1]
    )


def contracts_batch_cst(
    node: cst.CSTNode, qualnames: Callable[[cst.CSTNode], set[str]]
) -> bool:
    """``contracts_batch_ast`` for a libcst node of the file itself."""
    if isinstance(node, cst.BinaryOperation):
        return isinstance(node.operator, cst.MatrixMultiply) and _transposed_cst(
            node.left, qualnames
        )
    if not isinstance(node, cst.Call):
        return False
    args = [a.value for a in node.args if a.keyword is None and not a.star]
    names = qualnames(node.func)
    if names & PRODUCTS and len(args) == 2:
        return _transposed_cst(args[0], qualnames)
    if (
        isinstance(node.func, cst.Attribute)
        and node.func.attr.value in ("mm", "matmul")
        and not names & PRODUCTS
        and len(args) == 1
    ):
        return _transposed_cst(node.func.value, qualnames)
    if "torch.einsum" in names and len(args) == 3:
        equation = args[0]
        if isinstance(equation, cst.SimpleString):
            value = equation.evaluated_value
            return isinstance(value, str) and sums_first_index(value)
    return False


def _transposed_cst(
    expr: cst.BaseExpression, qualnames: Callable[[cst.CSTNode], set[str]]
) -> bool:
    if isinstance(expr, cst.Attribute) and expr.attr.value == "T":
        return not isinstance(expr.value, cst.Attribute)
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    dims = sorted(a.value.value for a in expr.args if isinstance(a.value, cst.Integer))
    names = qualnames(expr.func)
    if names & {"torch.transpose", "torch.t"}:
        return (
            bool(expr.args)
            and not isinstance(expr.args[0].value, cst.Attribute)
            and (len(expr.args) == 1 or dims == ["0", "1"])
        )
    if isinstance(expr.func.value, cst.Attribute):
        return False
    method = expr.func.attr.value
    if method == "t" and not expr.args:
        return True
    return (
        method in ("transpose", "permute")
        and len(expr.args) == 2
        and dims
        == [
            "0",
            "1",
        ]
    )


def sums_first_index(equation: str) -> bool:
    """An einsum equation of two operands that share their first index and drop
    it from the output (``"bi,bj->ij"``, spaces ignored): a sum over the
    batch."""
    equation = equation.replace(" ", "")
    if "->" not in equation:
        return False
    inputs, output = equation.split("->", 1)
    parts = inputs.split(",")
    if len(parts) != 2 or not all(parts) or "." in equation:
        return False
    first = parts[0][0]
    return parts[1][0] == first and first not in output
