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
of its methods picks items of it by a computed index or at random (not a
window of its last items, ``self.values[-self.window:]``, as a smoothed log
reads them); only a call handed values of the batch counts. Static
only: ``ast``.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from . import python_ast
from .project_nodes import self_attribute
from .random_names import spelled_draw

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
            and self_attribute(node.func.value) is not None
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
        isinstance(n, (ast.Constant, ast.UnaryOp, ast.unaryop)) for n in ast.walk(node)
    )


def _names(targets: list[ast.expr]) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _uses(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(expr))


def _reads(method: Definition, attribute: str) -> bool:
    """Does ``method`` pick items of ``self.<attribute>`` (``self.buffer[i]``,
    ``random.choices(self.buffer, k=n)``, a window from a random start), as a
    buffer is read, not summed up as a log of values is (its last value
    ``self.values[-1]``, its last few ``self.values[-self.window:]``)?"""
    drawn: set[str] = set()
    for node in ast.walk(method):  # `start = random.randint(...)`, in order
        if isinstance(node, ast.Assign) and _drawn(node.value, drawn):
            drawn |= _names(node.targets)
    for node in ast.walk(method):
        if (
            isinstance(node, ast.Subscript)
            and self_attribute(node.value) == attribute
            and _picks(node.slice, drawn)
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and any(self_attribute(a) == attribute for a in node.args)
            and _picking(node)
        ):
            return True
    return False


def _picking(call: ast.Call) -> bool:
    """``random.choices(...)``, ``random.sample(...)``, ``torch.multinomial``:
    picks at random (not ``self.sample_weights(...)`` nor ``downsample(...)``)."""
    return spelled_draw(ast.unparse(call.func), picks_only=True)


def _draw(call: ast.Call) -> bool:
    """``random.randint(...)``, ``np.random.choice(...)``, ``torch.randint``."""
    return spelled_draw(ast.unparse(call.func))


def _drawn(expr: ast.AST, drawn: set[str]) -> bool:
    """Is ``expr`` a random draw, or made from one (``drawn``: names bound so)?"""
    return any(
        (isinstance(n, ast.Call) and _draw(n))
        or (isinstance(n, ast.Name) and n.id in drawn)
        for n in ast.walk(expr)
    )


def _picks(index: ast.expr, drawn: set[str]) -> bool:
    """Does the index ``index`` pick items: a computed position (``i``), or a
    window from a random start (``[start:start + n]``, ``start`` drawn)? A
    constant (``[-1]``) or a window (``[-self.window:]``) is a log's read."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    for part in parts:
        if isinstance(part, ast.Slice):
            bounds = (part.lower, part.upper, part.step)
            if any(b is not None and _drawn(b, drawn) for b in bounds):
                return True
        elif not _constant(part):
            return True
    return False


def local_stored(index: ModuleIndex, cls: cst.ClassDef) -> tuple[tuple[str, str], ...]:
    """``stored`` of a class of this file (read again with ``ast``), once per
    class of each tree: every call a training step makes of a method asks."""
    import libcst as cst

    known = _LOCAL_STORED.setdefault(index, {})
    if cls not in known:
        try:
            tree = python_ast.parse(cst.Module([]).code_for_node(cls).strip())
        except SyntaxError:
            tree = ast.Module(body=[], type_ignores=[])
        node = tree.body[0] if tree.body else None
        known[cls] = stored(node) if isinstance(node, ast.ClassDef) else ()
    return known[cls]


#: Per module index (one per tree), ``local_stored`` of each class asked about.
_LOCAL_STORED: WeakKeyDictionary[
    ModuleIndex, dict[cst.ClassDef, tuple[tuple[str, str], ...]]
] = WeakKeyDictionary()


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
        attribute = dict(local_stored(index, cls)).get(method)
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
