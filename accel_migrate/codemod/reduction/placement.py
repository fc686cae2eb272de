"""Where a token count read at the loss can be written again: at its backward."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import variable_names
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: Methods that are safe to evaluate a second time in a count.
_PURE = frozenset(
    {
        "view",
        "reshape",
        "flatten",
        "contiguous",
        "squeeze",
        "unsqueeze",
        "to",
        "cuda",
        "cpu",
    }
    | {
        "float",
        "double",
        "half",
        "long",
        "int",
        "bool",
        "ne",
        "eq",
        "sum",
        "detach",
        "clone",
        "numel",
    }
)


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def bound_once(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """Is every name ``expr`` reads (``PAD_IDX``, ``tokenizer.pad_token_id``)
    assigned once in the file, or imported once (``from data import PAD``)? It then means the same where the criterion was
    built and where the loss is backpropagated."""
    for name in variable_names(expr):
        spelled = name.value
        bindings = sum(
            len(values) for key, values in index.values.items() if key[1] == spelled
        )
        if bindings == 0 and index.imported_once(spelled):
            continue
        if bindings != 1:
            return False
    return True


def pure(expr: cst.BaseExpression) -> bool:
    """Can ``expr`` be evaluated again with the same result (no calls with effects)?"""
    for call in findall(expr, m.Call()):
        func = call.func  # type: ignore[attr-defined]
        if not (isinstance(func, cst.Attribute) and func.attr.value in _PURE):
            return False
    return not findall(expr, m.NamedExpr() | m.Lambda() | m.Await() | m.Yield())


BINDINGS = (
    m.AssignTarget()
    | m.AugAssign()
    | m.AnnAssign()
    | m.For()
    | m.CompFor()
    | m.WithItem()
    | m.NamedExpr()
    | m.Del()
)


#: Runtime functions a count may call: they only read their arguments.
_RUNTIME_COUNTS = frozenset({"class_weight_count"})


def _counted(index: ModuleIndex, count: cst.BaseExpression) -> cst.BaseExpression:
    """What must be pure for ``count`` to be evaluated again: the arguments of a
    runtime count function (``accel.class_weight_count(w, y)``), else itself."""
    func = count.func if isinstance(count, cst.Call) else None
    if (
        isinstance(func, cst.Attribute)
        and m.matches(func.value, m.Name(index.alias))
        and func.attr.value in _RUNTIME_COUNTS
    ):
        return cst.Tuple([cst.Element(a.value) for a in count.args])  # type: ignore[union-attr]
    return count


def placement_blocker(
    index: ModuleIndex, count: cst.BaseExpression, anchor: cst.CSTNode, at: cst.CSTNode
) -> str | None:
    """Why ``count`` (read where ``anchor`` is evaluated) cannot be written at
    ``at``, or None. It can when ``at`` runs after the anchor's statement in the
    same block, and nothing in between binds or changes a name the count reads."""
    if not pure(_counted(index, count)):
        return "it calls functions"
    statement = statement_of(index, anchor)
    block = index.parent(statement) if statement is not None else None
    if block is None or not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return "it is computed in an expression the rule does not follow"
    body = list(block.body)
    start = next((i for i, s in enumerate(body) if s is statement), None)
    end = next(
        (
            i
            for i, s in enumerate(body)
            if s is at or any(a is s for a in index.ancestors(at))
        ),
        None,
    )
    if start is None or end is None or end < start:
        return "the loss is not computed before it in the same block"
    names = {n.value for n in variable_names(count)} - {"True", "False", "None"}
    for between in body[start : end + 1]:
        for node in findall(between, BINDINGS):
            bound = {
                n.value  # type: ignore[attr-defined]
                for target in bound_targets(node)
                for n in findall(target, m.Name())
            }
            if bound & names:
                return f"`{sorted(bound & names)[0]}` is assigned in between"
        for call in findall(between, m.Call(func=m.Attribute())):
            func = call.func  # type: ignore[attr-defined]
            if func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                if {n.value for n in findall(func.value, m.Name())} & names:
                    return f"`{code(func.value)}` is changed in place in between"
        for target in findall(between, m.AssignTarget(target=m.Subscript())):
            root = target.target.value  # type: ignore[attr-defined]
            if {n.value for n in findall(root, m.Name())} & names:
                return f"`{code(root)}` is changed in place in between"
    return None


def bound_targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(node, cst.AssignTarget):
        target = node.target
        # `x[i] = ...`, `x.a = ...` do not rebind `x` (changes are checked apart)
        return (
            [target] if not isinstance(target, (cst.Subscript, cst.Attribute)) else []
        )
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return [node.target] if isinstance(node.target, cst.Name) else []
    if isinstance(node, (cst.For, cst.CompFor)):
        return [node.target]
    if isinstance(node, cst.WithItem):
        return [node.asname.name] if node.asname is not None else []
    if isinstance(node, cst.NamedExpr):
        return [node.target]
    if isinstance(node, cst.Del):
        return [node.target]
    return []


def statement_of(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    """The statement of a block that ``node`` is in."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = index.parent(current)
        if isinstance(parent, (cst.IndentedBlock, cst.Module)):
            return current
        current = parent
    return None
