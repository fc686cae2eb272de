"""AM025's reading of how a configured batch size is spelled where it is used
(``rules/batch_size_shapes.py`` asks, through ``_configured``):

- ``configured_spelling``: an alias (``B = args.batch_size``, every value of ``B``
  a configured size) or a multiple (``2 * args.batch_size``, SimCLR's two views)
  is a configured size too;
- ``rebound_in_step``: a name the step rebinds before the use, from something
  that is not a configured size (``batch_size = imgs.size(0)`` in the loop, then
  ``torch.full((batch_size,), 1.0)``), holds the batch's own row count there,
  whatever the loader was configured with; so does one rebound under ``if i ==
  0:`` of the loop's own ``enumerate`` counter (the first step of every pass,
  before the use, with nothing setting it back). Under any other branch the
  rebinding may not run: the name may still hold the configured size.
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
        if _builds_loader(index, ancestor.body):
            # ProGAN's depth loop: `current_batch_size = batch_sizes[d]`, then a
            # loader built with it: that binding configures the loader
            continue
        for assign in findall(ancestor.body, m.Assign() | m.AnnAssign()):
            value = assign.value  # type: ignore[attr-defined]
            if value is None or line(assign) >= at:
                continue
            if not _rebinds(index, assign, key, configured, depth):
                continue
            statement = index.parent(assign)
            if statement is None:
                continue
            if index.parent(statement) in around:
                return True
            branch = _first_step_branch(index, statement, ancestor, around, line)
            if branch is not None and _only_rebound_so(
                index, ancestor, key, configured, depth
            ):
                return True  # under `if i == 0:` of the loop's own counter
    return False


def _builds_loader(index: ModuleIndex, body: cst.CSTNode) -> bool:
    """Does ``body`` build a prepared loader (``accel.prepare_dataloader(...)``)?"""
    return any(
        index.is_runtime_call(call, "prepare_dataloader")
        for call in findall(body, m.Call())
    )


def _rebinds(
    index: ModuleIndex,
    assign: cst.CSTNode,
    key: object,
    configured: Configured,
    depth: int,
) -> bool:
    """Does ``assign`` set the variable ``key`` to something not a configured size?"""
    value = assign.value  # type: ignore[attr-defined]
    return any(index.key(t) == key for t in _targets(assign)) and not configured(
        value, depth + 1
    )


def _first_step_branch(
    index: ModuleIndex,
    statement: cst.CSTNode,
    loop: cst.For | cst.While,
    around: list[cst.CSTNode],
    line: Callable[[cst.CSTNode], int],
) -> cst.If | None:
    """The ``if i == 0:`` (``if not i:``) whose body holds ``statement`` at its
    top level, where ``i`` is the ``enumerate`` counter of ``loop`` (from 0)
    and the ``if`` a statement of the loop's body, with no ``continue`` or
    ``break`` of the loop before it: it runs at the first step of every pass
    over the loader, before any later line of that step, so a rebinding there
    holds from then on (the first batch's row count, where the original held
    the first full batch's, the configured size)."""
    block = index.parent(statement)
    branch = index.parent(block) if block is not None else None
    if not isinstance(branch, cst.If) or branch.orelse is not None:
        return None
    holder = index.parent(branch)
    if holder is not loop.body or holder not in around:
        return None
    if not isinstance(loop, cst.For) or not _counts_from_zero(index, loop):
        return None
    counter = loop.target.elements[0].value  # type: ignore[attr-defined]
    if not _is_zero_test(branch.test, counter):
        return None
    start = line(branch)
    for jump in findall(loop.body, m.Continue() | m.Break()):
        if line(jump) < start:
            return None
    return branch


def _counts_from_zero(index: ModuleIndex, loop: cst.For) -> bool:
    """``for i, batch in enumerate(loader)`` (no start, or ``start=0``)."""
    iterable = loop.iter
    if not (
        isinstance(iterable, cst.Call)
        and "builtins.enumerate" in index.qualnames(iterable.func)
        and isinstance(loop.target, cst.Tuple)
        and len(loop.target.elements) == 2
        and isinstance(loop.target.elements[0].value, cst.Name)
    ):
        return False
    rest = iterable.args[1:]
    return not rest or (
        len(rest) == 1
        and isinstance(rest[0].value, cst.Integer)
        and rest[0].value.evaluated_value == 0
    )


def _is_zero_test(test: cst.BaseExpression, counter: cst.Name) -> bool:
    """``i == 0``, ``0 == i`` or ``not i``."""
    name = m.Name(counter.value)
    zero = m.Integer("0")
    return m.matches(
        test,
        m.Comparison(left=name, comparisons=[m.ComparisonTarget(m.Equal(), zero)])
        | m.Comparison(left=zero, comparisons=[m.ComparisonTarget(m.Equal(), name)])
        | m.UnaryOperation(operator=m.Not(), expression=name),
    )


def _only_rebound_so(
    index: ModuleIndex,
    loop: cst.For | cst.While,
    key: object,
    configured: Configured,
    depth: int,
) -> bool:
    """Is every assignment of ``key`` in ``loop`` one to a value that is not a
    configured size (none sets the configured size back for later steps)?"""
    for assign in findall(loop.body, m.Assign() | m.AnnAssign()):
        if assign.value is None:  # type: ignore[attr-defined]
            continue
        if any(index.key(t) == key for t in _targets(assign)) and not _rebinds(
            index, assign, key, configured, depth
        ):
            return False
    return True


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
