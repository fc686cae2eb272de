"""Model classes of this file that a training step runs, and what their forward runs.

Shared by the rules about per-process randomness in a model (AM020's draws in a
model's methods, AM027's dropout layers): which local classes are instances
called in a training step, and which of their methods ``forward`` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex, variable_names
from .method_closure import closure
from .subtrees import findall

T = TypeVar("T")


def training_step(index: ModuleIndex, path: tuple[cst.For | cst.While, ...]) -> bool:
    """Is a chain of loops (``ModuleIndex.loop_paths``) a training step: a loop that
    runs a backward and one that takes its batches from a data loader?"""
    return any(index.runs_backward(loop.body) for loop in path) and any(
        index.reads_loader(loop) for loop in path
    )


def reads_step_value(
    index: ModuleIndex, part: cst.CSTNode, loop: cst.For | cst.While
) -> bool:
    """Does ``part`` read a name that the training step ``loop`` binds (its
    target, or a value it assigns): a value of the step's batch?"""
    for inner in variable_names(part):
        key = index.key(inner)
        if key is None:
            continue
        if isinstance(loop, cst.For) and any(
            index.key(n) == key for n in variable_names(loop.target)
        ):
            return True
        for value in index.values.get(key, []):
            if value is not None and any(a is loop for a in index.ancestors(value)):
                return True
    return False


@lru_cache(maxsize=8)
def stepped_classes(index: ModuleIndex) -> frozenset[cst.ClassDef]:
    """Local classes an instance of which a training step calls (``model(x)`` with
    ``model = Net().to(device)``), and the local classes their methods build
    (``self.block = Block()``): those run in the step too. A step's loop may
    take its batches through a wrapper handed the loader (DINO's
    ``metric_logger.log_every(data_loader, 10, header)``)."""
    from .imported_draws import _wrapped_step

    modules = index.local_subclasses(["torch.nn."])
    if not modules:
        return frozenset()  # no model class here: skip the walk over every call
    found: set[cst.ClassDef] = set()
    for call in index.calls:
        func = call.func
        if not isinstance(func, cst.Name) and not (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            continue  # `model(x)` or `self.model(x)`: a variable holding a model
        classes = (model_classes(index, call.func) & modules) - found
        if classes and any(
            training_step(index, p) or _wrapped_step(index, p)
            for p in index.loop_paths(call)
        ):
            found |= classes
    todo = list(found)
    while todo:
        cls = todo.pop()
        for call in findall(cls.body, m.Call()):
            inner = index.local_class(call.func)  # type: ignore[attr-defined]
            if inner is not None and inner not in found:
                found.add(inner)
                todo.append(inner)
    return frozenset(found)


#: Methods that return the module itself (``VAE().to(device)``).
_SELF_RETURNING = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train"})


def forward_methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    """``forward`` and the methods it calls on ``self``, transitively."""
    methods = {
        s.name.value: s
        for s in (cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ())
        if isinstance(s, cst.FunctionDef)
    }

    def self_calls(method: cst.FunctionDef) -> list[str]:
        return [
            call.func.attr.value  # type: ignore[attr-defined]
            for call in findall(
                method.body, m.Call(func=m.Attribute(value=m.Name("self")))
            )
        ]

    return closure("forward", methods, self_calls)


def stepped_method(
    index: ModuleIndex, node: cst.CSTNode
) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
    """(class, method) when ``node`` is in a method of a local class that its
    ``forward`` runs (``forward_methods``) and a training step runs the class
    (``stepped_classes``); None otherwise."""
    function = index.enclosing_function(node)
    cls = index.enclosing_class(node) if function is not None else None
    if function is None or cls is None or function not in forward_methods(cls):
        return None
    return (cls, function) if cls in stepped_classes(index) else None


def model_classes(index: ModuleIndex, func: cst.BaseExpression) -> set[cst.ClassDef]:
    """Local classes whose instances a call ``func(...)`` may call: ``model`` bound
    to ``VAE()``, ``VAE().to(device)`` or ``accel.prepare_model(VAE())``, also
    through a function's parameter that its callers pass such a model."""
    return _classes_of(index, func, 0)


def instance_classes(index: ModuleIndex, expr: cst.BaseExpression) -> set[cst.ClassDef]:
    """Local classes (models or not) whose instance ``expr`` may hold: ``pool`` bound
    to ``ImagePool(50)``, ``self.pool`` set so in ``__init__``, a parameter its
    callers pass one."""
    return _classes_of(index, expr, 0)


def _classes_of(
    index: ModuleIndex, expr: cst.BaseExpression | None, depth: int
) -> set[cst.ClassDef]:
    def local(call: cst.Call) -> set[cst.ClassDef] | None:
        cls = index.local_class(call.func)
        return {cls} if cls is not None else None

    return held_instances(index, expr, local, depth)


def held_instances(
    index: ModuleIndex,
    expr: cst.BaseExpression | None,
    built: Callable[[cst.Call], set[T] | None],
    depth: int = 0,
) -> set[T]:
    """What ``expr`` may hold an instance of, where ``built`` tells it of a
    call that builds one (None: not such a call): followed through variables,
    methods that return their receiver (``.to(device)``),
    ``accel.prepare_model(...)`` and the parameters of a local function its
    callers hand one (``instance_classes`` of this file's classes,
    ``imported_draws.instance_facts`` of the project view's)."""
    if expr is None or depth > _DEPTH:
        return set()
    if isinstance(expr, cst.Call):
        found = built(expr)
        if found is not None:
            return found
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SELF_RETURNING:
            return held_instances(index, func.value, built, depth + 1)
        if index.is_runtime_call(expr, "prepare_model") and expr.args:
            return held_instances(index, expr.args[0].value, built, depth + 1)
        return set()
    key = index.key(expr)
    if key is None:
        return set()
    result: set[T] = set()
    for value in index.values.get(key, []):
        result |= held_instances(index, value, built, depth + 1)
    function = index.enclosing_function(expr)
    if function is not None and key == index.function_scope_key(function, key[1]):
        for site in index.call_sites(function):
            for param, arg in index.arguments(site):
                if param == key:
                    result |= held_instances(index, arg, built, depth + 1)
    return result


#: How far a model is followed back through variables and parameters.
_DEPTH = 6


#: How many calls deep a module-level function is followed from a forward.
_CALL_DEPTH = 3


def stepped_function(
    index: ModuleIndex, node: cst.CSTNode
) -> tuple[cst.ClassDef, cst.FunctionDef, cst.FunctionDef] | None:
    """(class, its method, the function) when ``node`` is in a module-level
    function of this file that a method ``forward`` runs calls, directly or
    through other such functions (``_CALL_DEPTH``), and a training step runs the
    class: the Beta-VAE's module-level ``reparametrize(mu, logvar)`` that
    ``BetaVAE_H.forward`` calls. None otherwise."""
    function = index.enclosing_function(node)
    if function is None or index.enclosing_class(function) is not None:
        return None
    for cls in sorted(stepped_classes(index), key=lambda c: c.name.value):
        for method in forward_methods(cls):
            if _reaches(index, method, function, _CALL_DEPTH, set()):
                return cls, method, function
    return None


def _reaches(
    index: ModuleIndex,
    caller: cst.FunctionDef,
    function: cst.FunctionDef,
    depth: int,
    seen: set[cst.FunctionDef],
) -> bool:
    if depth == 0 or caller in seen:
        return False
    seen.add(caller)
    for call in findall(caller.body, m.Call(func=m.Name())):
        callee = index.local_function(call.func)  # type: ignore[attr-defined]
        if callee is None or index.enclosing_class(callee) is not None:
            continue
        if callee is function or _reaches(index, callee, function, depth - 1, seen):
            return True
    return False
