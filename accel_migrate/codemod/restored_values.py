"""A value put back where it was read from (AM028's part): awd-lstm-lm scales the
learning rate by each window's random length for one step and restores it::

    lr2 = optimizer.param_groups[0]["lr"]                      # saved
    optimizer.param_groups[0]["lr"] = lr2 * seq_len / args.bptt  # differs: reported
    ...
    optimizer.param_groups[0]["lr"] = lr2                      # restored

The divergence analysis does not follow the order of statements: the scaled
store makes every read of ``param_groups[0]["lr"]`` differ between processes,
so ``lr2`` and the restore seem to as well. But the restore writes back what
the target held before the scaled store, in the same block, with nothing
between that leaves it: the value the processes held before, not a new
decision (the scaled store is the one reported). ``restores_saved`` recognises
that shape, strictly: one statement each, ``lr2`` bound once in its scope, no
``break``/``continue``/``return``/``raise``/``yield`` between the save and the
restore, the target's root name not rebound there, and a store to the same
target between them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .rule import Rule

_CODE = cst.Module([])
_EXITS = m.Break() | m.Continue() | m.Return() | m.Raise() | m.Yield()


def restores_saved(rule: Rule, assign: cst.Assign) -> bool:
    """Is ``assign`` (``target = name``) the restore of a value ``name`` was
    read from ``target`` earlier in the same block, around a store to
    ``target``?"""
    if len(assign.targets) != 1 or not isinstance(assign.value, cst.Name):
        return False
    target = assign.targets[0].target
    spelled = _CODE.code_for_node(target)
    name = assign.value.value
    line = rule.parent(assign)
    block = rule.parent(line) if line is not None else None
    if (
        not isinstance(line, cst.SimpleStatementLine)
        or len(line.body) != 1
        or not isinstance(block, (cst.IndentedBlock, cst.Module))
    ):
        return False
    statements = list(block.body)
    at = statements.index(line)
    saved = None
    for index in range(at - 1, -1, -1):
        if _stores(statements[index], name) is not None:
            saved = index
            break
    if saved is None:
        return False
    save = _stores(statements[saved], name)
    if save is None or _CODE.code_for_node(save.value) != spelled:
        return False
    key = rule.index.key(assign.value)
    if key is None or [
        v for v in rule.index.values.get(key, []) if v is not save.value
    ]:
        return False  # `name` is bound elsewhere too
    between = statements[saved + 1 : at]
    root = _root(target)
    if root is None or any(findall(s, _EXITS) for s in between):
        return False
    stored = False
    for statement in between:
        for node in findall(statement, m.Assign() | m.AugAssign() | m.AnnAssign()):
            targets = (
                [t.target for t in node.targets]  # type: ignore[attr-defined]
                if isinstance(node, cst.Assign)
                else [node.target]  # type: ignore[attr-defined]
            )
            for other in targets:
                if _CODE.code_for_node(other) == spelled:
                    stored = True
                elif any(
                    n.value in (root, name)
                    for n in findall(other, m.Name())
                    if isinstance(n, cst.Name)
                ) and not isinstance(other, cst.Subscript):
                    return False  # `optimizer = ...`, `lr2 = ...` rebound
    return stored


def _stores(statement: cst.CSTNode, name: str) -> cst.Assign | None:
    """``statement`` when it is the one line ``name = value``."""
    if (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Assign)
        and len(statement.body[0].targets) == 1
        and m.matches(statement.body[0].targets[0].target, m.Name(name))
    ):
        return statement.body[0]
    return None


def _root(target: cst.BaseExpression) -> str | None:
    while isinstance(target, (cst.Subscript, cst.Attribute)):
        target = target.value
    return target.value if isinstance(target, cst.Name) else None
