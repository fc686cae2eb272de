"""AM025's reading of how a configured batch size is spelled where it is used
(``rules/batch_size_shapes.py`` asks, through ``_configured``):

- ``configured_spelling``: an alias (``B = args.batch_size``, every value of ``B``
  a configured size) or a multiple (``2 * args.batch_size``, SimCLR's two views)
  is a configured size too;
- ``rebound_in_step``: a name the step rebinds before the use, from something
  that is not a configured size (``batch_size = imgs.size(0)`` in the loop, then
  ``torch.full((batch_size,), 1.0)``), holds the batch's own row count there,
  whatever the loader was configured with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

Configured = Callable[[cst.BaseExpression, int], bool]


def configured_spelling(
    index: ModuleIndex, expr: cst.BaseExpression, configured: Configured, depth: int
) -> bool:
    """Is ``expr`` a multiple of a configured size (``2 * B``, ``B * 2``) or a
    variable every value of which is one (``B = args.batch_size``)?"""
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, cst.Multiply
    ):
        for factor, other in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(factor, cst.Integer) and configured(other, depth + 1):
                return True
        return False
    if not isinstance(expr, cst.Name):
        return False
    key = index.key(expr)
    values = index.values.get(key, []) if key is not None else []
    return bool(values) and all(
        value is not None and configured(value, depth + 1) for value in values
    )


def multiple(expr: cst.BaseExpression) -> bool:
    """``2 * B`` or ``B * 2``: an integer times a name or an attribute."""
    if not (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Multiply)
    ):
        return False
    sides = (expr.left, expr.right)
    return any(isinstance(s, cst.Integer) for s in sides) and any(
        isinstance(s, (cst.Name, cst.Attribute)) for s in sides
    )


def rebound_in_step(
    index: ModuleIndex,
    name: cst.BaseExpression,
    configured: Configured,
    line: Callable[[cst.CSTNode], int],
    depth: int,
) -> bool:
    """Is ``name`` assigned, in a loop around it (in its function) and on an
    earlier line, a value that is not a configured size (``batch_size =
    imgs.size(0)``)? The use then reads that value."""
    if not isinstance(name, cst.Name):
        return False
    key = index.key(name)
    if key is None:
        return False
    at = line(name)
    around = list(index.ancestors(name))
    for ancestor in around:
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if not isinstance(ancestor, (cst.For, cst.While)):
            continue
        for assign in findall(ancestor.body, m.Assign() | m.AnnAssign()):
            value = assign.value  # type: ignore[attr-defined]
            if value is None or line(assign) >= at:
                continue
            statement = index.parent(assign)
            if statement is None or index.parent(statement) not in around:
                continue  # under a branch or a loop of its own: not every step
            if any(index.key(t) == key for t in _targets(assign)) and not configured(
                value, depth + 1
            ):
                return True
    return False


def _targets(assign: cst.CSTNode) -> list[cst.Name]:
    if isinstance(assign, cst.AnnAssign):
        roots = [assign.target]
    else:
        assert isinstance(assign, cst.Assign)
        roots = [t.target for t in assign.targets]
    names: list[cst.Name] = []
    for root in roots:
        if isinstance(root, cst.Name):
            names.append(root)
        elif isinstance(root, (cst.Tuple, cst.List)):
            names += [e.value for e in root.elements if isinstance(e.value, cst.Name)]
    return names
