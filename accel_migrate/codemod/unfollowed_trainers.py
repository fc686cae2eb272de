"""Trainer classes whose model the trainer finders cannot follow: the fast.ai
course-v3 ``Runner`` (dl2 ``exp/nb_04.py``), whose ``fit(self, epochs, learn)``
stores the learner on ``self`` and whose ``one_batch`` calls
``self.loss.backward()`` and ``self.opt.step()``, the model and the optimizer
read through properties of ``self.learn``.

Such a class trains (a backward and an optimizer step in its methods), but
none of ``library_trainers``' facts holds: no ``__init__`` parameter it runs as
a model (``trains``), no optimizer it builds (``trains_own``), no method
parameter it runs as a model (``method_trains``). A script that builds one and
calls its methods trains through it, so it is no "not a training entry point",
and its loaders, prints and saves cannot be migrated while each process trains
a full copy in the class's file: AM004 leaves it whole, naming the class
(``ProjectFacts.unfollowed_trainers``, ``TrainerBlocks``). Static only: ``ast``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .library_trainers import Lineage, _methods
from .project_nodes import _own_nodes, self_attribute

Method = ast.FunctionDef | ast.AsyncFunctionDef


def unfollowed_training(lineage: Lineage) -> str:
    """How the class trains, as a phrase for a finding (``"`fit(epochs, learn)`
    runs `self.loss.backward()` (line 126, in `one_batch`) and
    `self.opt.step()` (line 129)..."``); "" when no method calls
    ``.backward()`` on something other than ``self``, or none steps an
    optimizer reached through ``self`` (``self.opt.step()``, no argument: not
    a GradScaler's ``step(optimizer)``) that the class does not build itself
    (``self.X = call(...)``). Whether another
    finder follows the model is the caller's to check (``HelperFact``)."""
    methods = {m.name: m for m in _methods(lineage)}
    built = _built_attributes(
        m  # a base's `__init__` a subclass overrides builds for it too (NCF)
        for cls in lineage
        for m in cls.body
        if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    )
    backward: tuple[str, ast.Call] | None = None
    step: tuple[str, ast.Call] | None = None
    for name, method in methods.items():
        for node in _own_nodes(method):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            ):
                continue
            receiver = node.func.value
            if node.func.attr == "backward" and not (
                isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")
            ):
                backward = _first(backward, (name, node))
            elif (
                node.func.attr == "step"
                and not (node.args or node.keywords)
                and _through_self(receiver)
                and _first_attribute(receiver) not in built
            ):  # an optimizer's step, not a GradScaler's `step(optimizer)`
                step = _first(step, (name, node))
    if backward is None or step is None:
        return ""
    entry = _entry(methods, backward[0])
    return (
        f"`{_signature(methods[entry])}` runs "
        f"`{ast.unparse(backward[1].func)}()` (line {backward[1].lineno}"
        f"{_inside(backward[0], entry)}) and `{ast.unparse(step[1].func)}()` "
        f"(line {step[1].lineno}{_inside(step[0], entry)}) on what the instance "
        "holds on `self`, which accel-migrate cannot follow to a model its "
        "caller builds (none is run as a model from an `__init__` or method "
        "parameter)"
    )


def _first(
    found: tuple[str, ast.Call] | None, other: tuple[str, ast.Call]
) -> tuple[str, ast.Call]:
    """The earlier of two calls in the source (the walk is not in its order)."""
    if found is None:
        return other
    key = (other[1].lineno, other[1].col_offset)
    return other if key < (found[1].lineno, found[1].col_offset) else found


def _built_attributes(methods: Iterable[Method]) -> set[str]:
    """``self.X = call(...)`` in any method: what the class builds itself
    (pytorch_tabnet's ``self._optimizer = self.optimizer_fn(self.network
    .parameters())`` over a network it builds too), not what it is handed."""
    found: set[str] = set()
    for method in methods:
        for node in _own_nodes(method):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                for target in node.targets:
                    attr = self_attribute(target)
                    if attr is not None:
                        found.add(attr)
    return found


def _first_attribute(expr: ast.expr) -> str:
    """``learn`` of ``self.learn.opt``."""
    while isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Attribute):
        expr = expr.value
    return expr.attr if isinstance(expr, ast.Attribute) else ""


def _through_self(expr: ast.expr) -> bool:
    """``self.opt``, ``self.learn.opt``: an attribute chain from ``self``."""
    if not isinstance(expr, ast.Attribute):
        return False
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id == "self"


def _entry(methods: dict[str, Method], step: str) -> str:
    """The method a caller calls to run ``step``: up the ``self.X(...)`` calls
    from it while exactly one method calls the current one (``one_batch`` <-
    ``all_batches`` <- ``fit``)."""
    callers: dict[str, set[str]] = {name: set() for name in methods}
    for name, method in methods.items():
        for node in _own_nodes(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "self"
                and node.func.attr in methods
                and node.func.attr != name
            ):
                callers[node.func.attr].add(name)
    current, seen = step, {step}
    while len(callers[current]) == 1:
        (above,) = callers[current]
        if above in seen:
            break
        current = above
        seen.add(current)
    return current


def _signature(method: Method) -> str:
    arguments = method.args
    names = [a.arg for a in [*arguments.posonlyargs, *arguments.args]][1:]
    return f"{method.name}({', '.join(names)})"


def _inside(method: str, entry: str) -> str:
    return "" if method == entry else f", in `{method}`"
