"""The dist-aware helpers a single-GPU fork keeps, read through (``main_process_tests``).

ConvNeXt's, DeiT's and torchvision's reference ``utils.py`` choose the process
that saves with ``if is_main_process():`` over::

    def is_dist_avail_and_initialized():
        if not dist.is_available():
            return False
        if not dist.is_initialized():
            return False
        return True

    def get_rank():
        if not is_dist_avail_and_initialized():
            return 0
        return dist.get_rank()

    def is_main_process():
        return get_rank() == 0

``returned_test`` gives the test a function such as ``is_main_process`` returns;
``rank_helper_body`` the rank query a function such as ``get_rank`` returns where
a group is started (``0`` where none is). Only functions of the file, called with
no arguments, whose bodies are exactly these shapes (a docstring aside).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from .rule import Rule

_AVAILABLE = "torch.distributed.is_available"
_INITIALIZED = "torch.distributed.is_initialized"


def _statements(function: cst.FunctionDef) -> list[cst.BaseStatement] | None:
    """The body's statements, its docstring left out; None for a one-line body."""
    body = function.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    statements = list(body.body)
    if statements and _docstring(statements[0]):
        statements = statements[1:]
    return statements


def _docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(
            statement.body[0].value, cst.SimpleString | cst.ConcatenatedString
        )
    )


def _returned(statement: cst.BaseStatement) -> cst.BaseExpression | None:
    """``return VALUE``'s value, alone on its line."""
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Return)
    ):
        return statement.body[0].value
    return None


def _helper(rule: Rule, node: cst.CSTNode) -> list[cst.BaseStatement] | None:
    """The statements of the file's function that ``node`` calls with no argument."""
    if not isinstance(node, cst.Call) or node.args:
        return None
    function = rule.index.local_function(node.func)
    if (
        function is None
        or function.params.params
        or rule.index.enclosing_class(function)
    ):
        return None
    return _statements(function)


def returned_test(rule: Rule, node: cst.CSTNode) -> cst.BaseExpression | None:
    """``is_main_process()``'s ``get_rank() == 0``: what a function of the file
    whose body is one ``return`` returns, where ``node`` calls it with no
    argument."""
    statements = _helper(rule, node)
    if statements is None or len(statements) != 1:
        return None
    return _returned(statements[0])


def rank_helper_body(rule: Rule, node: cst.CSTNode) -> cst.BaseExpression | None:
    """``get_rank()``'s ``dist.get_rank()``: where ``node`` calls, with no
    argument, a function of the file whose body is ``if not GUARD: return 0``
    then ``return QUERY``, and GUARD is true exactly where a process group is
    started (``_initialized``), the QUERY it returns there."""
    statements = _helper(rule, node)
    if statements is None or len(statements) != 2:
        return None
    guard, last = statements
    if not (
        isinstance(guard, cst.If)
        and guard.orelse is None
        and isinstance(guard.test, cst.UnaryOperation)
        and isinstance(guard.test.operator, cst.Not)
        and _initialized(rule, guard.test.expression)
        and isinstance(guard.body, cst.IndentedBlock)
        and len(guard.body.body) == 1
    ):
        return None
    zero = _returned(guard.body.body[0])
    if not (isinstance(zero, cst.Integer) and zero.value == "0"):
        return None
    return _returned(last)


def _initialized(rule: Rule, test: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``test`` true exactly where the default process group is started?
    ``dist.is_initialized()``; ``dist.is_available() and dist.is_initialized()``
    (available wherever a group is started); a function of the file, called
    with no argument, whose body returns one of these, or is ``if not X:
    return False`` for each X of ``dist.is_available()`` and
    ``dist.is_initialized()`` (the latter among them) then ``return True``."""
    if depth > 2:
        return False
    if _query(rule, test, _INITIALIZED):
        return True
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        left, right = test.left, test.right
        return (
            _query(rule, left, _AVAILABLE) and _initialized(rule, right, depth + 1)
        ) or (_initialized(rule, left, depth + 1) and _query(rule, right, _AVAILABLE))
    statements = _helper(rule, test)
    if not statements:
        return False
    if len(statements) == 1:
        value = _returned(statements[0])
        return value is not None and _initialized(rule, value, depth + 1)
    if not _constant(_returned(statements[-1]), "True"):
        return False
    asked = []
    for statement in statements[:-1]:
        if not (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and isinstance(statement.test, cst.UnaryOperation)
            and isinstance(statement.test.operator, cst.Not)
            and isinstance(statement.body, cst.IndentedBlock)
            and len(statement.body.body) == 1
            and _constant(_returned(statement.body.body[0]), "False")
        ):
            return False
        inner = statement.test.expression
        if _query(rule, inner, _INITIALIZED):
            asked.append(_INITIALIZED)
        elif _query(rule, inner, _AVAILABLE):
            asked.append(_AVAILABLE)
        else:
            return False
    return _INITIALIZED in asked


def _query(rule: Rule, node: cst.BaseExpression, name: str) -> bool:
    return (
        isinstance(node, cst.Call)
        and not node.args
        and name in rule.qualnames(node.func)
    )


def _constant(node: cst.BaseExpression | None, name: str) -> bool:
    return isinstance(node, cst.Name) and node.value == name
