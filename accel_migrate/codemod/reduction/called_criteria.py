"""A loss computed by calling an instance of a loss class of a local module:
``myloss = LpLoss(size_average=False)`` with ``class LpLoss`` in
``utilities3.py``, then ``loss = myloss(out, y)``.

The project view reads what calling such an instance returns
(``HelperFact.call_reduction``, ``called_reductions``): a full sum of the batch,
a full mean, or a reduction chosen at run time by a setting of the instance.
The criterion is traced to the calls that build it (``model_classes._Tracer``:
through this file's assignments and the arguments every call of its function
passes). Every construction a class whose call sums: a sum, weighed as one;
every one a mean: a mean (with constructions of other callables, the
caller's reading of those); one chosen at run time, or a sum among other
constructions: unknown, with the reason naming the class and its file. A class the
view reads nothing of (a model returning logits) says nothing: the caller's
default holds. Static only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .. import python_ast
from .facts import Fact, reduction_rewritten
from .placement import code
from .script_subclasses import script_subclass

_COPIES = frozenset({"copy.copy", "copy.deepcopy"})
_COPY_DEPTH = 3

if TYPE_CHECKING:
    from ..analysis import ModuleIndex
    from ..project_facts import HelperFact
    from ..reduction_settings import Setting, SettingReductions


def called_criterion_fact(index: ModuleIndex, func: cst.BaseExpression) -> Fact | None:
    """The fact of ``func(...)`` where ``func`` holds an instance of a local
    module's class whose call reduces the batch; None where it is not shown to."""
    from .model_classes import _Tracer

    if not isinstance(func, (cst.Name, cst.Attribute)) or index.key(func) is None:
        return None
    origins = _copied(index, _Tracer(index).origins(func, frozenset(), 0), 0)
    if isinstance(origins, Fact):
        return origins
    if isinstance(origins, str) or not origins:
        return None
    found: dict[str, tuple[str, str]] = {}
    counted = 0
    for origin in origins:
        helper = index.helper(origin.func) if isinstance(origin, cst.Call) else origin
        if helper is None and isinstance(origin, cst.Call):
            # `class RelL2(LpLoss)` of this file, with no call of its own
            helper = script_subclass(index, origin.func)
        if helper is None or helper.kind != "class" or not helper.call_reduction[0]:
            continue
        counted += 1
        reduction = helper.call_reduction
        if reduction[0] == "unknown" and helper.setting_reductions is not None:
            built = origin if isinstance(origin, cst.Call) else None
            reduction = constructed_reduction(
                index, helper.setting_reductions, built, reduction
            )
        previous = found.get(helper.where)
        if previous is not None and previous[0] == "unknown":
            reduction = previous
        elif previous is not None and previous[0] != reduction[0]:
            # `LpLoss(size_average=False)` here, `LpLoss()` there
            reduction = ("unknown", "its constructions reduce the batch differently")
        found[helper.where] = reduction
    if not found:
        return None
    kinds = {kind for kind, _ in found.values()}
    where = ", ".join(sorted(found))
    if counted == len(origins) and kinds in ({"sum"}, {"mean"}):
        kind = kinds.pop()
        return Fact(kind, what=f"the call of `{code(func)}` ({where})")  # type: ignore[arg-type]
    if kinds == {"mean"}:
        return None  # a mean, and the other constructions: the caller's reading
    reasons = [why for kind, why in found.values() if kind == "unknown"]
    detail = reasons[0] if reasons else "its constructions reduce the batch differently"
    return Fact(
        "unknown",
        f"the loss is computed by `{code(func)}`, an instance of {where}: {detail}, "
        'which the analysis cannot tell here; pass reduction="sum" to '
        "accel.backward where it is a sum over the batch",
    )


def _copied(
    index: ModuleIndex, origins: list[cst.Call | HelperFact] | str, depth: int
) -> list[cst.Call | HelperFact] | str | Fact:
    """``origins`` with a copy (``copy.copy(base)``, ``copy.deepcopy``) replaced
    by the constructions of what it copies: the same class and settings, which
    a later write in this file (``myloss.__dict__.update(size_average=False)``)
    unsettles as it does the original's (``constructed_reduction``). A copy of
    what cannot be traced, in a file that writes such a setting: unknown."""
    from .model_classes import _Tracer

    if isinstance(origins, str):
        return origins
    found: list[cst.Call | HelperFact] = []
    for origin in origins:
        if not (
            isinstance(origin, cst.Call)
            and index.qualnames(origin.func) & _COPIES
            and len(origin.args) == 1
            and not origin.args[0].star
        ):
            found.append(origin)
            continue
        copied = origin.args[0].value
        inner = (
            _Tracer(index).origins(copied, frozenset(), 0)
            if depth < _COPY_DEPTH
            else "copied too many times"
        )
        inner = _copied(index, inner, depth + 1)
        if isinstance(inner, Fact):
            return inner
        unread = isinstance(inner, str) or any(
            isinstance(o, cst.Call)
            and index.helper(o.func) is None
            and script_subclass(index, o.func) is None
            for o in inner
        )
        rewritten = reduction_rewritten(index) if unread else ""
        if isinstance(inner, str) and not rewritten:
            return inner
        if rewritten:
            return Fact(
                "unknown",
                f"the loss is computed by a copy of `{code(copied)}` "
                f"({code(origin)}), {rewritten}: its reduction over the batch "
                'is not known here; pass reduction="sum" to accel.backward where '
                "it is a sum over the batch",
            )
        found += inner  # type: ignore[arg-type]
    return found


def constructed_reduction(
    index: ModuleIndex,
    settings: SettingReductions,
    built: cst.Call | None,
    otherwise: tuple[str, str],
) -> tuple[str, str]:
    """The reduction of an instance built by ``built`` (``LpLoss(size_average=False)``)
    whose class reduces as its attributes say; ``otherwise`` (the class's
    reading) where the construction is not seen."""
    if built is None or any(arg.star for arg in built.args):
        return otherwise
    values: dict[str, object] = {}
    shown: list[str] = []
    for setting in settings.settings:
        rewritten = reduction_rewritten(index, frozenset({setting.attribute}))
        if rewritten:
            return (
                "unknown",
                f"`{settings.entry}` reduces as `self.{setting.attribute}` says, "
                f"{rewritten}",
            )
        value = _argument(built, setting)
        if isinstance(value, str):
            return ("unknown", f"`{settings.entry}` reduces as {value} says")
        # (`not` of it: a subclass's `super().__init__(size_average=not summed)`)
        values[setting.attribute] = not value[0] if setting.negated else value[0]
        if setting.parameter:
            shown.append(f"{setting.parameter}={value[0]!r}")
    kinds = settings.kinds(values)
    if kinds in ({"sum"}, {"mean"}):
        return (next(iter(kinds)), "")
    with_ = f"built with {', '.join(shown)}" if shown else "as built"
    if kinds == {""}:
        what = "values that are not a full sum or mean over the batch"
    else:
        what = "a sum over the batch on one path and a mean or another value on another"
    return ("unknown", f"`{settings.entry}` {with_} returns {what}")


def _argument(built: cst.Call, setting: Setting) -> tuple[object] | str:
    """The literal value ``built`` gives ``setting`` (in a 1-tuple), or why it
    is not known."""
    if not setting.parameter:
        return (setting.default,)
    what = f"`self.{setting.attribute}` (set from `{setting.parameter}`)"
    given: cst.BaseExpression | None = None
    positional = [arg for arg in built.args if arg.keyword is None]
    for arg in built.args:
        if arg.keyword is not None and arg.keyword.value == setting.parameter:
            given = arg.value
    if given is None and 0 <= setting.position < len(positional):
        given = positional[setting.position].value
    if given is None:
        if setting.state == "value":
            return (setting.default,)
        return f"{what}, whose default is not a literal"
    try:
        return (python_ast.literal_eval(code(given)),)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return f"{what}, given `{code(given)}` at {code(built.func)}(...)"
