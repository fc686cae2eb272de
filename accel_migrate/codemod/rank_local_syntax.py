"""The syntax questions of the provenance walk (``rank_local_sources``): which
statements of a block rebind a variable outright, the assignment targets a
statement binds, the calls an expression makes, and which entry of a dict
built with literal keys a subscript reads. Nothing here follows a value; each
function reads the tree (and the index's names) only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .rank_local_calls import _UNIFORM_RUNTIME_CALLS
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex
    from .rank_local_sources import Source


def _statements(node: cst.CSTNode) -> Sequence[cst.CSTNode] | None:
    """The statements of a block (a module's, an indented block's)."""
    if isinstance(node, (cst.Module, cst.IndentedBlock)):
        return node.body
    return None


def _rebinds(index: ModuleIndex, statement: cst.CSTNode, key: Key) -> bool:
    """Does ``statement`` always rebind ``key`` outright: a plain assignment to
    it, an ``if`` whose every arm does? (Not a ``with``, whose manager may
    swallow an exception raised before the assignment.)"""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            else:
                continue
            leaves = [leaf for t in targets for leaf in _targets(t)]
            if any(index.key(leaf) == key for leaf in leaves):
                return True
        return False
    if isinstance(statement, cst.If):
        orelse = statement.orelse
        if orelse is None or not _block_rebinds(index, statement.body, key):
            return False
        if isinstance(orelse, cst.If):
            return _rebinds(index, orelse, key)
        return _block_rebinds(index, orelse.body, key)
    return False


def _block_rebinds(index: ModuleIndex, block: cst.BaseSuite, key: Key) -> bool:
    if isinstance(block, cst.IndentedBlock):
        return any(_rebinds(index, s, key) for s in block.body)
    return _rebinds(index, cst.SimpleStatementLine(body=block.body), key)


def _inside(
    index: ModuleIndex, node: cst.CSTNode, statements: Sequence[cst.CSTNode]
) -> bool:
    """Is ``node`` one of ``statements`` or inside one?"""
    if any(node is s for s in statements):
        return True
    ids = {id(s) for s in statements}
    return any(id(a) in ids for a in index.ancestors(node))


def _outer(source: Source, found: list[Source]) -> bool:
    """Does another source of ``found`` sit inside ``source``'s call?"""
    below = {id(n) for n in findall(source.node, m.Call()) if n is not source.node}
    return any(s is not source and id(s.node) in below for s in found)


def _targets(target: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [leaf for e in target.elements for leaf in _targets(e.value)]
    if isinstance(target, cst.StarredElement):
        return _targets(target.value)
    if isinstance(target, (cst.Name, cst.Attribute)):
        return [target]
    return []


def _calls(expr: cst.CSTNode, index: ModuleIndex) -> list[cst.Call]:
    """The calls ``expr`` makes, outside lambdas and the runtime's uniform calls
    (whose arguments do not make their result differ)."""
    found: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> bool:
            if index.is_runtime_call(node, *_UNIFORM_RUNTIME_CALLS):
                return False
            found.append(node)
            return True

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    expr.visit(_Calls())
    return found


def _entry_key(node: cst.CSTNode) -> str | None:
    """``"AUC"`` of ``res["AUC"]``: a read of one entry by a literal key."""
    if not (
        isinstance(node, cst.Subscript)
        and len(node.slice) == 1
        and isinstance(node.slice[0].slice, cst.Index)
        and isinstance(node.slice[0].slice.value, cst.SimpleString)
    ):
        return None
    key = node.slice[0].slice.value.evaluated_value
    return key if isinstance(key, str) else None


_DICT_CALLS = frozenset({"builtins.dict", "collections.OrderedDict"})


def _dict_entry(
    index: ModuleIndex, expr: cst.CSTNode, wanted: str
) -> cst.BaseExpression | None:
    """The value of entry ``wanted`` of a dict built with literal keys only:
    ``{"AUC": auc, ...}``, ``dict(AUC=auc)``, ``OrderedDict([("AUC", auc),
    ...])``; None where ``expr`` is no such dict or lacks the key."""
    pairs: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
    if isinstance(expr, cst.Dict):
        for element in expr.elements:
            if not isinstance(element, cst.DictElement):
                return None  # `**other`: any key
            pairs.append((element.key, element.value))
    elif isinstance(expr, cst.Call) and index.qualnames(expr.func) & _DICT_CALLS:
        for arg in expr.args:
            if arg.keyword is not None:
                pairs.append((cst.SimpleString(repr(arg.keyword.value)), arg.value))
            elif arg.star or not isinstance(arg.value, (cst.List, cst.Tuple)):
                return None
            else:
                for element in arg.value.elements:
                    item = element.value
                    if not (isinstance(item, cst.Tuple) and len(item.elements) == 2):
                        return None
                    pairs.append((item.elements[0].value, item.elements[1].value))
    else:
        return None
    found = None
    for key, value in pairs:
        if not isinstance(key, cst.SimpleString):
            return None
        if key.evaluated_value == wanted:
            found = value  # the last one of a key wins
    return found
