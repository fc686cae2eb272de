"""The caller's side of calls into a CLASS of another batch file
(``project_callers``): what a call constructs or runs, and the class of a model
it hands over.

``trainer = Trainer(model, train_loader, optimizer)`` in ``main.py``, with
``class Trainer`` in ``trainer.py``, binds the arguments to ``__init__``'s
parameters (after ``self``), recorded as ``Trainer.__init__``;
``trainer.evaluate(val_loader)`` binds them to ``evaluate``'s, recorded as
``Trainer.evaluate``, when every value the caller gives ``trainer`` (in its
function, or at module level) is a construction of that class. A chained
``Trainer(...).train()`` is followed the same way. Anything else (an instance
handed in, stored on ``self``, made by a factory) is not followed: its calls are
not counted, and the callee's own parameters then decide alone.

``model_class`` names the local model class a caller's argument is an instance
of (``model = GPT(config)``, through ``.to()`` and conditional expressions, or a
factory of one class: ``HelperFact.model_class``), for the callee to read what
its ``forward`` returns and which of its methods build its optimizer (minGPT's
``configure_optimizers``). Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .project_nodes import SAME_OBJECT_METHODS, same_object_of

if TYPE_CHECKING:
    from .project_facts import HelperFact
    from .project_helpers import HelperFacts
    from .project_view import ProjectView, Target

_DEPTH = 8

Callee = tuple["Target", "ast.FunctionDef | ast.AsyncFunctionDef", int]


def callee_of(
    view: ProjectView,
    reader: HelperFacts,
    caller: str,
    function: ast.AST,
    call: ast.Call,
) -> Callee | None:
    """What ``call`` (in ``caller``) runs of another batch file: the target
    recorded (its file, ``name`` or ``Class.method``), the function and how many
    leading parameters the call does not bind (1 for ``self``); None otherwise."""
    target = reader.resolve(call.func)
    if isinstance(target, tuple) and target[1] and "." not in target[1]:
        if not _batch_file(view, target, caller):
            return None
        scan = view._scan(target[0], reader.roots)
        if target[1] in scan.functions:
            return target, scan.functions[target[1]], 0
        cls = scan.classes.get(target[1])
        init = _method(cls, "__init__") if cls is not None else None
        if init is None:
            return None
        return (target[0], f"{target[1]}.__init__"), init, 1
    if not isinstance(call.func, ast.Attribute):
        return None
    cls_target = _instance_of(view, reader, caller, function, call.func.value)
    if cls_target is None:
        return None
    cls = view._scan(cls_target[0], reader.roots).classes[cls_target[1]]
    method = _method(cls, call.func.attr)
    if method is None or _not_bound(method):
        return None
    return (cls_target[0], f"{cls_target[1]}.{method.name}"), method, 1


def _batch_file(view: ProjectView, target: Target, caller: str) -> bool:
    return target[0] != caller and target[0] in view.scripts


def _method(
    cls: ast.ClassDef, name: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for statement in cls.body:
        if (
            isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
            and statement.name == name
        ):
            return statement
    return None


def _not_bound(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A static or class method: its first parameter is not the instance."""
    return any(
        isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
        for d in method.decorator_list
    )


def _instance_of(
    view: ProjectView,
    reader: HelperFacts,
    caller: str,
    function: ast.AST,
    receiver: ast.expr,
) -> Target | None:
    """The batch class (file, name) every value of ``receiver`` constructs."""
    from .project_nodes import assigned_in

    if isinstance(receiver, ast.Call):
        values: list[ast.expr] = [receiver]
    elif isinstance(receiver, ast.Name):
        if _parameter_of(function, receiver.id):
            return None  # handed in: calls this file does not show make it
        values = assigned_in(function, receiver.id) or reader.scan.assigned.get(
            receiver.id, []
        )
    else:
        return None
    found: set[Target] = set()
    for value in values:
        if not isinstance(value, ast.Call):
            return None
        target = reader.resolve(value.func)
        if (
            not isinstance(target, tuple)
            or not target[1]
            or "." in target[1]
            or not _batch_file(view, target, caller)
            or target[1] not in view._scan(target[0], reader.roots).classes
        ):
            return None
        found.add(target)
    return found.pop() if len(found) == 1 else None


def _parameter_of(function: ast.AST, name: str) -> bool:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    args = function.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return any(a is not None and a.arg == name for a in every)


def model_class(
    reader: HelperFacts, expr: ast.expr, function: ast.AST, depth: int = 0
) -> HelperFact | None:
    """The local model class (of a module the caller imports) every value of
    ``expr`` is an instance of; None where that is not one known class."""
    from .project_nodes import assigned_in

    if depth > _DEPTH:
        return None
    if isinstance(expr, ast.IfExp):
        both = {
            model_class(reader, e, function, depth + 1)
            for e in (expr.body, expr.orelse)
        }
        return both.pop() if len(both) == 1 else None
    if isinstance(expr, ast.Name):
        if _parameter_of(function, expr.id):
            return None
        values = assigned_in(function, expr.id) or reader.scan.assigned.get(expr.id, [])
        values = [v for v in values if not same_object_of(v, expr.id)]
        found = {model_class(reader, v, function, depth + 1) for v in values}
        return found.pop() if len(found) == 1 else None
    if not isinstance(expr, ast.Call):
        return None
    if isinstance(expr.func, ast.Attribute) and expr.func.attr in SAME_OBJECT_METHODS:
        return model_class(reader, expr.func.value, function, depth + 1)
    target = reader.resolve(expr.func)
    if not isinstance(target, tuple):
        return None
    fact = reader._follow(target)
    if fact is None or fact.returns != "model":
        return None
    return fact if fact.kind == "class" else fact.model_class
