"""Losses added from a dict: ``sum(loss_dict.values())``.

The values of a dict are losses, not the batch's samples, so ``sum`` over them is
not a sum over the batch: it adds terms whose reductions are those of the dict's
values. A dict literal (also one a function of this file returns, with no key
added later) is read; a dict a model or a criterion returned (torchvision's
detection models, DETR's ``SetCriterion``) is not, and its losses may be
normalised by a count of the batch (objects, boxes) that differs per process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..subtrees import findall
from .facts import Fact, _added, _agree
from .placement import code

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex

#: The reducer's ``fact(expr, at, depth)``.
FactOf = Callable[[cst.BaseExpression, cst.CSTNode, int], Fact]

_DICT_VIEW = m.Call(
    func=m.Attribute(attr=m.Name("values") | m.Name("keys") | m.Name("items")), args=[]
)


def dict_view(expr: cst.BaseExpression) -> bool:
    """``d.values()``, ``d.keys()``, ``d.items()``."""
    return m.matches(expr, _DICT_VIEW)


def computed_in_call(call: cst.Call) -> Fact:
    return Fact(
        "unknown",
        f"the losses summed are computed inside `{code(call)}`, whose reductions the "
        "analysis does not see: a loss normalised by a count of the batch (objects, "
        "boxes, tokens) has a different count on each process's share. Pass that "
        "count as `count=` where the loss is backpropagated, unless every loss is a "
        "mean over samples",
    )


def dict_values_fact(
    index: ModuleIndex, fact: FactOf, view: cst.Call, depth: int
) -> Fact:
    """``sum(d.values())`` where every value of ``d`` is a dict literal, also
    one a function of this file returns, and nothing adds keys to it later:
    the facts of its values, added. Otherwise unknown."""
    unknown = Fact(
        "unknown",
        f"the loss adds the values of a dict (`{code(view)}`) whose "
        "reductions the analysis does not read",
    )
    base = view.func.value  # type: ignore[attr-defined]
    key = index.key(base) if isinstance(base, cst.Name) else None
    values = list(index.values.get(key, ())) if key is not None else []
    if not values or _keys_added(index, key):
        return unknown
    literals: list[cst.Dict] = []
    for value in values:
        target = index.callee(value) if isinstance(value, cst.Call) else None
        if target is not None and target[1] == 0:
            returns = [r.value for r in findall(target[0].body, m.Return())]
            returned = [r for r in returns if isinstance(r, cst.Dict)]
            if not returns or len(returned) != len(returns):
                return unknown
            literals += returned
        elif isinstance(value, cst.Dict):
            literals.append(value)
        else:
            return unknown
    facts = []
    for literal in literals:
        terms = [e for e in literal.elements if isinstance(e, cst.DictElement)]
        if not terms or len(terms) != len(literal.elements):
            return unknown  # `{**other}`
        result = fact(terms[0].value, terms[0].value, depth + 1)
        for term in terms[1:]:
            result = _added(result, fact(term.value, term.value, depth + 1))
        facts.append(result)
    return _agree(facts) or unknown


def _keys_added(index: ModuleIndex, key: Key | None) -> bool:
    """``d[k] = ...``, ``d.update(...)``, ``d.setdefault(...)`` anywhere."""
    for node in findall(index.module, m.Assign() | m.AugAssign()):
        targets = (
            [t.target for t in node.targets]  # type: ignore[union-attr]
            if isinstance(node, cst.Assign)
            else [node.target]  # type: ignore[union-attr]
        )
        for target in targets:
            if isinstance(target, cst.Subscript) and index.key(target.value) == key:
                return True
    for call in findall(
        index.module,
        m.Call(func=m.Attribute(attr=m.Name("update") | m.Name("setdefault"))),
    ):
        if index.key(call.func.value) == key:  # type: ignore[attr-defined]
            return True
    return False


def model_loss_dict(
    index: ModuleIndex, iterable: cst.BaseExpression
) -> cst.Call | None:
    """The call that made the losses ``sum(...)`` adds, where they are the
    values of a dict a model or criterion returned: ``sum(loss for loss in
    loss_dict.values())``, ``sum(loss_dict[k] * w[k] for k in loss_dict.keys())``,
    ``sum(loss_dict.values())`` after ``loss_dict = model(images, targets)``
    (torchvision detection, DETR's criterion). A function of this file is not
    such a call: its returns are read."""
    source = iterable
    if isinstance(iterable, (cst.GeneratorExp, cst.ListComp)):
        source = iterable.for_in.iter
    if dict_view(source):
        source = source.func.value  # type: ignore[attr-defined]
    key = index.key(source) if isinstance(source, cst.Name) else None
    values = index.values.get(key, ()) if key is not None else ()
    calls = [v for v in values if isinstance(v, cst.Call)]
    if not values or len(calls) != len(values):
        return None
    for call in calls:
        func = index.key(call.func)
        if index.callee(call) is not None or not index.values.get(
            func, ()  # type: ignore[arg-type]
        ):
            return None  # a local function or class, a library call (dict(...))
    return calls[0]


def returned_dict_item(
    index: ModuleIndex, expr: cst.BaseExpression
) -> tuple[cst.FunctionDef, list[cst.BaseExpression]] | Fact | None:
    """``losses["loss"]`` where every binding of ``losses`` calls one function
    of this file (not a class) whose every return is a dict with that key
    (``return dict(gmm=gmm, loss=loss)``, ``return {"loss": loss}``):
    world-models' ``get_loss``. The function and the values under the key,
    for the reducer to read as that function's returns; an unknown fact where
    a return is not such a dict; None where ``expr`` is not such an item."""
    from ..patterns import string_value

    if not (isinstance(expr, cst.Subscript) and len(expr.slice) == 1):
        return None
    index_node = expr.slice[0].slice
    if not isinstance(index_node, cst.Index):
        return None
    name = string_value(index_node.value)
    base = expr.value
    if name is None:
        return None
    if isinstance(base, cst.Call):
        calls = [base]
    else:
        key = index.key(base) if isinstance(base, cst.Name) else None
        values = list(index.values.get(key, ())) if key is not None else []
        if not values or not all(isinstance(v, cst.Call) for v in values):
            return None
        calls = values  # type: ignore[assignment]
    targets = [index.callee(c) for c in calls]
    if any(
        t is None or index.local_class(c.func)
        for t, c in zip(targets, calls, strict=True)
    ):
        return None
    functions = {t[0] for t in targets if t is not None}
    if len(functions) != 1:
        return None
    (function,) = functions
    returns = [r.value for r in findall(function.body, m.Return())]  # type: ignore[attr-defined]
    items = [_dict_value(r, name) for r in returns]
    if not items or any(i is None for i in items):
        return Fact(
            "unknown",
            f"`{code(expr)}` is the {name!r} value of what `{function.name.value}` "
            "returns, which the analysis cannot read as a dict with that key",
        )
    return function, items  # type: ignore[return-value]


def _dict_value(
    value: cst.BaseExpression | None, name: str
) -> cst.BaseExpression | None:
    """The value under ``name`` of ``dict(name=...)`` or ``{"name": ...}``."""
    from ..patterns import string_value

    if isinstance(value, cst.Call) and m.matches(value.func, m.Name("dict")):
        found = [
            a.value
            for a in value.args
            if a.keyword is not None and a.keyword.value == name
        ]
        if any(a.star for a in value.args) or len(found) != 1:
            return None
        return found[0]
    if isinstance(value, cst.Dict):
        found = []
        for element in value.elements:
            if not isinstance(element, cst.DictElement):
                return None  # `**other`: any key
            if string_value(element.key) == name:
                found.append(element.value)
        return found[0] if len(found) == 1 else None
    return None
