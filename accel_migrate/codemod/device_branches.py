"""Syntax helpers of AM001 (rules/device_choice.py): the one assignment of an
``if``/``else`` branch that picks a device, a condition negated, an MPS device
string."""

from __future__ import annotations

import libcst as cst

from .analysis import attr_chain
from .patterns import string_value


def _single_assignment(block: cst.BaseSuite) -> tuple[str, cst.BaseExpression] | None:
    statements = block.body if isinstance(block, cst.IndentedBlock) else ()
    if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
        return None
    small = statements[0].body
    if (
        len(small) != 1
        or not isinstance(small[0], cst.Assign)
        or len(small[0].targets) != 1
    ):
        return None
    target = attr_chain(small[0].targets[0].target)
    return None if target is None else (target, small[0].value)


def _replace_value(block: cst.BaseSuite, value: cst.BaseExpression) -> cst.BaseSuite:
    assert isinstance(block, cst.IndentedBlock)
    line = block.body[0]
    assert isinstance(line, cst.SimpleStatementLine)
    assign = line.body[0]
    assert isinstance(assign, cst.Assign)
    return block.with_changes(
        body=[line.with_changes(body=[assign.with_changes(value=value)])]
    )


def _is_mps_string(node: cst.CSTNode) -> bool:
    value = string_value(node)
    return value is not None and (value == "mps" or value.startswith("mps:"))


def _negated(node: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return node.expression
    if not isinstance(node, (cst.Name, cst.Attribute, cst.Call)) and not node.lpar:
        node = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.UnaryOperation(operator=cst.Not(), expression=node)
