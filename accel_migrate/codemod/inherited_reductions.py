"""What calling an instance of a class with no call of its own returns: its
base's call, with the settings its own ``__init__`` gives the base
(``HelperFact.call_reduction`` and ``setting_reductions`` of a subclass).

The FNO repository's ``LpLoss`` (utilities3.py) reduces as its
``size_average`` says (``reduction_settings``). A project that wants the sum
everywhere writes ``class RelL2(LpLoss)`` whose ``__init__`` calls
``super().__init__(size_average=False)`` and defines no ``__call__``:
``myloss = RelL2()`` sums over the batch. Before this fact the subclass read as
a class with no call, which says nothing, and the caller's mean held: the
gradient was half the original's at world size 2, with no finding.

A class with no ``forward``/``__call__`` takes the reading of its first base
that is not a plain base (``object``, ``abc.ABC``, ``typing.Generic``,
``torch.nn.Module``: no call to read). The base's settings
(``SettingReductions``) are carried through the subclass's ``__init__``: its
one top-level ``super().__init__(...)`` (or ``Base.__init__(self, ...)``)
gives each setting a literal, one of the subclass's own parameters (never
rebound), ``not`` of one, or leaves the base's literal default; a top-level
``self.size_average = ...`` after that call replaces it. Anything else (a
``*args`` call, a write of the setting elsewhere in the class or its module, a
``setattr``, two calls) leaves the settings unread: the reduction stays
unknown. A subclass that defines other methods may change what the base's
call runs: unknown. A base the project defines but that cannot be read, or a
library base named as a loss (``torch.nn.MSELoss``, ``SomeLoss``) whose call
this view does not read: unknown, never the caller's mean. A library base of
another kind (a model's, a dataset's) says nothing, as before. Static only.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from .names import MODULE_BASES
from .project_nodes import self_attribute
from .reduction_settings import (
    _NOT_LITERAL,
    Setting,
    SettingReductions,
    _literal,
    _outside_other_classes,
    _parameter,
    _written_by_name,
    call_reductions,
)

#: A base's reading: (call_reduction, setting_reductions) of a base read;
#: ``PLAIN``: a base with no call this view reads (object, a library model);
#: None: a base whose call cannot be read.
BaseReading = tuple[tuple[str, str], SettingReductions | None] | str | None
PLAIN = "plain"

_PLAIN_PREFIXES = ("builtins.", "abc.", "typing.", "enum.", "collections.")


def entry_method(cls: ast.ClassDef) -> str:
    """The name of the method calling an instance runs, "" where the class
    defines neither ``forward`` nor ``__call__``."""
    names = {
        node.name
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    return next((n for n in ("forward", "__call__") if n in names), "")


def library_base(dotted: str) -> BaseReading:
    """The reading of a base that is not the project's: plain, or unknown
    where it is a loss (``torch.nn.MSELoss``, ``losses.DiceLoss``)."""
    last = dotted.rsplit(".", 1)[-1]
    if dotted in MODULE_BASES or dotted.startswith(_PLAIN_PREFIXES):
        return PLAIN
    if last.lower().endswith(("loss", "criterion")):
        return None
    return PLAIN


def class_call_reductions(
    cls: ast.ClassDef,
    module: ast.Module | None,
    bases: list[tuple[str, BaseReading]],
) -> dict[str, object]:
    """``call_reduction`` and ``setting_reductions`` of ``cls`` (in ``module``,
    whose writes of a setting unsettle it), its ``bases`` read by the caller
    in order (spelling, reading)."""
    if entry_method(cls) or not bases:
        return call_reductions(cls, module)
    read = [(name, reading) for name, reading in bases if reading != PLAIN]
    if not read:
        return call_reductions(cls, module)  # no call: says nothing
    name, reading = read[0]
    if reading is None or isinstance(reading, str):
        return _unknown(
            f"`{cls.name}` has no call of its own: calling an instance runs the "
            f"call of its base `{name}`, which the analysis cannot read"
        )
    reduction, settings = reading
    if not reduction[0]:
        if any(r is None or (not isinstance(r, str) and r[0][0]) for _, r in read):
            return _unknown(
                f"`{cls.name}` has no call of its own and several bases whose "
                "calls may run"
            )
        return call_reductions(cls, module)
    own = [
        node.name
        for node in cls.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name != "__init__"
    ]
    if own:
        return _unknown(
            f"`{cls.name}` runs the call of its base `{name}` and defines methods "
            f"of its own (`{'`, `'.join(own)}`) that the call may run"
        )
    if reduction[0] != "unknown" or settings is None:
        return {"call_reduction": reduction, "setting_reductions": None}
    return {
        "call_reduction": reduction,
        "setting_reductions": subclass_settings(cls, module, settings),
    }


def _unknown(why: str) -> dict[str, object]:
    return {"call_reduction": ("unknown", why), "setting_reductions": None}


def subclass_settings(
    cls: ast.ClassDef, module: ast.Module | None, settings: SettingReductions
) -> SettingReductions | None:
    """The base's ``settings`` as an instance of ``cls`` gets them (see the
    module); None where they cannot be read."""
    tested = {s.attribute for s in settings.settings}
    init = next(
        (
            node
            for node in cls.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name == "__init__"
        ),
        None,
    )
    call, after = _super_init(cls, init) if init is not None else (None, [])
    if init is not None and call is None:
        return None
    own: dict[str, ast.expr] = {}
    targets: list[ast.AST] = []
    for stmt in after:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            attr = self_attribute(stmt.targets[0])
            if attr in tested:
                if attr in own:
                    return None
                own[attr] = stmt.value
                targets.append(stmt.targets[0])
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr":
            return None
    for node in _outside_other_classes(module if module is not None else cls, cls):
        if any(_written_by_name(node, attr) for attr in tested):
            return None
        if (
            isinstance(node, ast.Attribute)
            and node.attr in tested
            and not isinstance(node.ctx, ast.Load)
            and not any(node is t for t in targets)
        ):
            return None
    found: list[Setting] = []
    for setting in settings.settings:
        if setting.attribute in own:
            made = _from(init, setting.attribute, own[setting.attribute])  # type: ignore[arg-type]
        elif call is None or not setting.parameter:
            made = setting
        else:
            made = _given(init, call, setting)  # type: ignore[arg-type]
        if made is None:
            return None
        found.append(made)
    return replace(settings, settings=tuple(found))


def _super_init(
    cls: ast.ClassDef, init: ast.FunctionDef | ast.AsyncFunctionDef
) -> tuple[ast.Call | None, list[ast.stmt]]:
    """The one ``super().__init__(...)`` of ``init`` (a top-level statement)
    and the statements after it; (None, []) where there is not exactly one."""
    calls = [
        node
        for node in ast.walk(init)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "__init__"
    ]
    if len(calls) != 1:
        return None, []
    call = calls[0]
    receiver = call.func.value  # type: ignore[attr-defined]
    args = list(call.args)
    if isinstance(receiver, ast.Call) and getattr(receiver.func, "id", "") == "super":
        pass
    elif isinstance(receiver, (ast.Name, ast.Attribute)) and (
        args and isinstance(args[0], ast.Name) and args[0].id == "self"
    ):
        # `LpLoss.__init__(self, size_average=False)`
        call = ast.Call(func=call.func, args=args[1:], keywords=call.keywords)
    else:
        return None, []
    for position, stmt in enumerate(init.body):
        if isinstance(stmt, ast.Expr) and stmt.value is calls[0]:
            return call, init.body[position + 1 :]
    return None, []


def _given(
    init: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, setting: Setting
) -> Setting | None:
    """``setting`` (of the base's ``__init__`` parameter) as ``call`` passes it."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None
    given = next((k.value for k in call.keywords if k.arg == setting.parameter), None)
    if given is None and 0 <= setting.position < len(call.args):
        given = call.args[setting.position]
    if given is None:
        if setting.state != "value":
            return None
        return Setting(setting.attribute, "", -1, "value", setting.default)
    made = _from(init, setting.attribute, given)
    if made is not None and setting.negated:
        made = _negated(made)
    return made


def _from(
    init: ast.FunctionDef | ast.AsyncFunctionDef, attr: str, expr: ast.expr
) -> Setting | None:
    """The setting ``attr`` takes from ``expr`` in ``init``: a literal, a
    parameter never rebound, or ``not`` of one; None otherwise."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _from(init, attr, expr.operand)
        return _negated(inner) if inner is not None else None
    if isinstance(expr, ast.Name):
        return _parameter(init, attr, expr.id)
    literal = _literal(expr)
    if literal is _NOT_LITERAL:
        return None
    return Setting(attr, "", -1, "value", literal)


def _negated(setting: Setting) -> Setting:
    if not setting.parameter:
        return replace(setting, default=not setting.default)
    return replace(setting, negated=not setting.negated)
