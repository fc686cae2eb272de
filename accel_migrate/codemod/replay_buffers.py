"""Replay buffers filled from a training step (``HelperFact.stored`` for the
project's classes; this file's own classes are read the same way).

rosinality/igebm-pytorch's ``SampleBuffer.push(samples, class_ids)`` appends
each sample to ``self.buffer``, and ``get(n)`` draws from it the starting
points of the next step's Langevin chains; JEM keeps its replay buffer so too.
After migration each process pushes only the samples of its own share of the
batch, so each process's buffer holds a different set, fewer than the
original's, and the inputs it makes for the next steps are not the original's.
AM032 reports the training step's call that fills it.

A class stores what a method is handed when the method appends it (or a value
made from it: ``samples.detach().to("cpu")``, the items of a loop over it) to a
list it keeps on ``self`` (``.append``, ``.extend``, ``.insert``; not an item
set by a key, as a dict of meters or an EMA's shadow weights is), and another
of its methods picks items of it by a computed index or at random; only a
call handed values of the batch counts. Static
only: ``ast``.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the project view reads this without libcst
    import libcst as cst

    from .analysis import ModuleIndex

_ADDS = frozenset({"append", "extend", "insert", "appendleft"})
Definition = ast.FunctionDef | ast.AsyncFunctionDef


def stored(cls: ast.ClassDef) -> tuple[tuple[str, str], ...]:
    """(method, attribute) for each method of ``cls`` that stores what it is
    handed in a list attribute another method reads back."""
    methods = [
        s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    found: list[tuple[str, str]] = []
    for method in methods:
        if method.name.startswith("__"):
            continue  # built once (`__init__`), or a protocol method
        attribute = _stores(method)
        if attribute and any(
            other is not method
            and other.name != "__init__"
            and other.name != "__len__"
            and _reads(other, attribute)
            for other in methods
        ):
            found.append((method.name, attribute))
    return tuple(found)


def _stores(method: Definition) -> str:
    """The ``self`` attribute ``method`` adds its parameters' values to; ""."""
    arguments = method.args.posonlyargs + method.args.args + method.args.kwonlyargs
    handed = {a.arg for a in arguments[1:]}
    if not handed:
        return ""
    for node in ast.walk(method):  # values made from the parameters, in order
        if isinstance(node, ast.Assign) and _uses(node.value, handed):
            handed |= _names(node.targets)
        elif isinstance(node, ast.For) and _uses(node.iter, handed):
            handed |= _names([node.target])
    for node in ast.walk(method):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _ADDS
            and _self_attribute(node.func.value)
            and any(_uses(a, handed) and not _number(a) for a in node.args)
        ):
            return node.func.value.attr  # type: ignore[attr-defined]
    return ""


def _number(expr: ast.expr) -> bool:
    """A Python number (``loss.item()``, ``float(x)``): a logged value."""
    return isinstance(expr, ast.Call) and (
        (isinstance(expr.func, ast.Attribute) and expr.func.attr == "item")
        or (isinstance(expr.func, ast.Name) and expr.func.id in ("float", "int"))
    )


def _constant(node: ast.expr) -> bool:
    return all(
        isinstance(n, (ast.Constant, ast.UnaryOp, ast.unaryop, ast.Slice))
        for n in ast.walk(node)
    ) and not isinstance(node, ast.Slice)


def _self_attribute(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _names(targets: list[ast.expr]) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _uses(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _reads(method: Definition, attribute: str) -> bool:
    """Does ``method`` pick items of ``self.<attribute>`` (``self.buffer[i]``,
    ``random.choices(self.buffer, k=n)``), as a buffer is read, not summed up
    as a log of values is?"""

    def held(node: ast.expr) -> bool:
        return _self_attribute(node) and node.attr == attribute  # type: ignore[attr-defined]

    for node in ast.walk(method):
        if (
            isinstance(node, ast.Subscript)
            and held(node.value)
            and not _constant(node.slice)
        ):
            return True  # `self.buffer[i]`, not the last value `self.values[-1]`
        if (
            isinstance(node, ast.Call)
            and any(held(a) for a in node.args)
            and any(w in ast.unparse(node.func) for w in ("choice", "sample"))
        ):
            return True
    return False


def local_stored(cls: cst.ClassDef) -> tuple[tuple[str, str], ...]:
    """``stored`` of a class of this file (read again with ``ast``)."""
    import libcst as cst

    try:
        tree = ast.parse(cst.Module([]).code_for_node(cls).strip())
    except SyntaxError:
        return ()
    node = tree.body[0] if tree.body else None
    return stored(node) if isinstance(node, ast.ClassDef) else ()


def buffer_push(index: ModuleIndex, call: cst.Call) -> tuple[str, str] | None:
    """(the class and method, as written; the attribute) for a call a training
    step makes of a method of a local or imported object that stores what it
    is handed for later steps (``buffer.push(neg_img, neg_id)``); None
    otherwise."""
    import libcst as cst

    from .imported_draws import instance_facts
    from .model_methods import instance_classes, training_step

    func = call.func
    if not isinstance(func, cst.Attribute) or not call.args:
        return None
    if not any(training_step(index, path) for path in index.loop_paths(call)):
        return None
    from .batch_rows import batch_values

    values = batch_values(index)
    if not any(
        (key := index.key(name)) is not None and key in values
        for arg in call.args
        for name in _cst_names(arg.value)
    ):
        return None  # handed nothing of the batch (an EMA handed the model)
    method = func.attr.value
    for cls in sorted(instance_classes(index, func.value), key=lambda c: c.name.value):
        attribute = dict(local_stored(cls)).get(method)
        if attribute:
            return f"`{cls.name.value}.{method}`", attribute
    for fact in sorted(instance_facts(index, func.value), key=lambda f: f.name):
        attribute = dict(fact.stored).get(method)
        if attribute:
            return f"`{fact.name}.{method}` in {fact.file}", attribute
    return None


def _cst_names(expr: cst.BaseExpression) -> list[cst.Name]:
    import libcst as cst
    import libcst.matchers as m

    from .subtrees import findall

    return [expr] if isinstance(expr, cst.Name) else findall(expr, m.Name())  # type: ignore[return-value]
