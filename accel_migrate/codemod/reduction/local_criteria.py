"""A loss computed by a criterion class of this file: ``criterion(out, y)`` with
``criterion = FocalLoss(gamma=2.0, size_average=False)`` and ``class
FocalLoss(nn.Module)`` defined in the script.

Calling the instance runs the class's ``forward`` (``__call__`` where the class
defines no ``forward``), so the loss has the reduction its ``return``
statements compute: a class that returns ``loss.sum()`` is a sum over the
batch, not the mean every ``torch.nn`` loss defaults to. Where the returns
disagree (``return loss.mean() if self.size_average else loss.sum()``, or an
``if`` with one of each), the reduction is chosen at run time and is not known
here: the reason names the class. A class whose returns reduce nothing (a
model's ``forward`` returning logits) says nothing: the caller's default holds.

A branch on a setting of the instance is followed where every construction
fixes it: ``if self.size_average:`` / ``if self.reduction == "sum":`` with
``self.size_average = size_average`` in ``__init__`` and every
``FocalLoss(...)`` of the file passing a literal for it (or leaving the
literal default): only the returns that branch reaches count.

``criterion`` is followed through its assignments in this file, each a
construction of the same local class (also through ``.to(device)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..patterns import self_attribute
from ..subtrees import findall
from .facts import Fact, _agree, reduction_rewritten
from .placement import code
from .summed_weights import returned_weighted_sum

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..analysis import ModuleIndex

#: Calls that hand back the object they are called on.
_SAME_OBJECT = frozenset({"to", "cuda", "cpu", "float", "double", "train", "eval"})


def criterion_class(
    index: ModuleIndex, func: cst.BaseExpression, prepared: bool = False
) -> tuple[cst.ClassDef, cst.FunctionDef, list[cst.Call]] | None:
    """The local class ``func`` (a variable) is an instance of, the method a
    call of it runs, and the constructions; None where a value of it is not
    such a construction. ``prepared``: also through ``accel.prepare_model(...)``
    (the same object, run by the same ``forward``)."""
    if not isinstance(func, cst.Name):
        return None
    key = index.key(func)
    if key is None:
        return None
    values = index.values.get(key, [])
    classes: set[cst.ClassDef] = set()
    built: list[cst.Call] = []
    for value in values:
        while isinstance(value, cst.Call):
            if (
                isinstance(value.func, cst.Attribute)
                and value.func.attr.value in _SAME_OBJECT
            ):
                value = value.func.value
            elif prepared and index.is_runtime_call(value, "prepare_model"):
                if not value.args:
                    return None
                value = value.args[0].value
            else:
                break
        cls = index.local_class(value.func) if isinstance(value, cst.Call) else None
        if cls is None:
            return None
        classes.add(cls)
        built.append(value)  # type: ignore[arg-type]
    if len(classes) != 1:
        return None
    cls = classes.pop()
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    method = methods.get("forward") or methods.get("__call__")
    return (cls, method, built) if method is not None else None


def criterion_fact(
    index: ModuleIndex,
    func: cst.BaseExpression,
    fact: Callable[[cst.BaseExpression], Fact],
    prepared: bool = False,
) -> Fact | None:
    """The reduction of ``func(...)`` where ``func`` is an instance of a local
    criterion class whose returns reduce the batch; None where it is not one, or
    its returns reduce nothing (``fact`` reads one returned expression).
    ``prepared``: as ``criterion_class``'s."""
    found = criterion_class(index, func, prepared)
    if found is None:
        return None
    cls, method, built = found
    settings = _Settings(index, cls, built)
    returns = [
        r.value
        for r in _reached_returns(method.body.body, settings)
        if r.value is not None and not m.matches(r.value, m.Name("None"))
    ]
    branches = [b for r in returns for b in _branches(r, settings)]
    facts = [fact(b) for b in branches]
    if not any(f.reduced or f.kind == "unknown" for f in facts):
        return None
    where = f"`{code(func)}` is a `{cls.name.value}` (this file)"
    chosen = _agree(facts)
    if chosen is None:
        kinds = ", ".join(dict.fromkeys(f.kind for f in facts))
        return Fact(
            "unknown",
            f"{where}, whose `{method.name.value}` returns losses of different "
            f"reductions ({kinds}), chosen when it runs: the reduction over the "
            "batch is not known here",
        )
    if chosen.kind == "token-mean":
        return Fact(
            "token-mean",
            reason=f"the loss is a mean over {chosen.what}, computed inside "
            f"`{cls.name.value}.{method.name.value}`: its count of them is not "
            "known where the loss is backpropagated",
            what=chosen.what,
        )
    if chosen.kind == "sum":
        weighted = returned_weighted_sum(index, branches, method)
        if weighted:
            return Fact("unknown", f"{where}: {weighted}")
        return Fact("sum", what=f"{where}, whose `{method.name.value}` returns a sum")
    return chosen


#: A setting whose value is not known.
_UNKNOWN = object()


class _Settings:
    """``self.NAME`` of an instance, where ``__init__`` sets it once to a literal
    or to a parameter every construction gives the same literal (or its
    literal default)."""

    def __init__(
        self, index: ModuleIndex, cls: cst.ClassDef, built: list[cst.Call]
    ) -> None:
        self.index = index
        self.cls = cls
        self.built = built
        init = next(
            (
                s
                for s in cls.body.body
                if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
            ),
            None,
        )
        self.init = init
        self.assigned: dict[str, list[cst.BaseExpression]] = {}
        for method in cls.body.body:
            if not isinstance(method, cst.FunctionDef):
                continue
            for node in findall(method, m.Assign() | m.AugAssign() | m.AnnAssign()):
                targets = (
                    [t.target for t in node.targets]  # type: ignore[attr-defined]
                    if isinstance(node, cst.Assign)
                    else [node.target]  # type: ignore[attr-defined]
                )
                for target in targets:
                    name = self_attribute(target)
                    if name is not None:
                        value = node.value if method is init else None  # type: ignore[attr-defined]
                        if isinstance(node, cst.AugAssign):
                            value = None
                        self.assigned.setdefault(name, []).append(value)

    def value(self, name: str) -> object:
        values = self.assigned.get(name, [])
        if len(values) != 1 or values[0] is None or self.init is None:
            return _UNKNOWN
        if reduction_rewritten(self.index, frozenset({name})):
            return _UNKNOWN  # `criterion.size_average = True` after the construction
        expr = values[0]
        literal = _literal(expr)
        if literal is not _UNKNOWN or not isinstance(expr, cst.Name):
            return literal
        return self._argument(expr.value)

    def _argument(self, parameter: str) -> object:
        params = self.init.params  # type: ignore[union-attr]
        positional = [*params.posonly_params, *params.params][1:]  # after self
        names = [p.name.value for p in positional]
        every = {p.name.value: p for p in [*positional, *params.kwonly_params]}
        if parameter not in every or not self.built:
            return _UNKNOWN
        found: set[object] = set()
        for call in self.built:
            if any(a.star for a in call.args):
                return _UNKNOWN
            given = [
                a.value for a in call.args if a.keyword and a.keyword.value == parameter
            ]
            plain = [a.value for a in call.args if a.keyword is None]
            if not given and parameter in names and names.index(parameter) < len(plain):
                given = [plain[names.index(parameter)]]
            if given:
                value = _literal(given[0])
            else:
                default = every[parameter].default
                value = _literal(default) if default is not None else _UNKNOWN
            if value is _UNKNOWN:
                return _UNKNOWN
            found.add(value)
        return found.pop() if len(found) == 1 else _UNKNOWN

    def test(self, expr: cst.BaseExpression) -> object:
        """The truth of an ``if`` test on settings: True, False or unknown."""
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            inner = self.test(expr.expression)
            return _UNKNOWN if inner is _UNKNOWN else not inner
        name = self_attribute(expr)
        if name is not None:
            value = self.value(name)
            return _UNKNOWN if value is _UNKNOWN else bool(value)
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            target = expr.comparisons[0]
            name = self_attribute(expr.left)
            other = _literal(target.comparator)
            if name is None or other is _UNKNOWN:
                return _UNKNOWN
            value = self.value(name)
            if value is _UNKNOWN:
                return _UNKNOWN
            if isinstance(target.operator, (cst.Equal, cst.Is)):
                return value == other
            if isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
                return value != other
        return _UNKNOWN


def _literal(expr: cst.BaseExpression | None) -> object:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, (cst.Integer, cst.Float)):
        return expr.evaluated_value
    return _UNKNOWN


def _reached_returns(
    body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], settings: _Settings
) -> list[cst.Return]:
    """The ``return`` statements of a method body that can run, an ``if`` on a
    known setting taking only its branch (and the statements after it not run
    where that branch always returns)."""
    found, _ = _walk(body, settings)
    return found


def _walk(
    body: Sequence[cst.BaseStatement | cst.BaseSmallStatement], settings: _Settings
) -> tuple[list[cst.Return], bool]:
    """(returns reached, does the block always return)."""
    found: list[cst.Return] = []
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine):
            returns = [s for s in statement.body if isinstance(s, cst.Return)]
            found += returns
            if returns:
                return found, True
        elif isinstance(statement, cst.If):
            returns, always = _walk_if(statement, settings)
            found += returns
            if always:
                return found, True
        else:
            found += findall(statement, m.Return())  # type: ignore[arg-type]
    return found, False


def _walk_if(statement: cst.If, settings: _Settings) -> tuple[list[cst.Return], bool]:
    truth = settings.test(statement.test)
    orelse = statement.orelse
    other: list[cst.BaseStatement] | None = None
    if isinstance(orelse, cst.If):
        other_walk = _walk_if(orelse, settings)
    elif isinstance(orelse, cst.Else):
        other = list(orelse.body.body)  # type: ignore[arg-type]
        other_walk = _walk(other, settings)
    else:
        other_walk = ([], False)
    body_walk = _walk(statement.body.body, settings)  # type: ignore[arg-type]
    if truth is True:
        return body_walk
    if truth is False:
        return other_walk
    return body_walk[0] + other_walk[0], body_walk[1] and other_walk[1]


def _branches(
    expr: cst.BaseExpression, settings: _Settings
) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.IfExp):
        truth = settings.test(expr.test)
        if truth is True:
            return _branches(expr.body, settings)
        if truth is False:
            return _branches(expr.orelse, settings)
        return [*_branches(expr.body, settings), *_branches(expr.orelse, settings)]
    return [expr]
