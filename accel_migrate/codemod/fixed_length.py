"""Lists that hold as many items on every process: a loop over one runs as often.

A collective inside a loop nested in the training loop (``for cb in
self.callbacks: cb.on_batch_end(step, accel.global_loss(loss).item())``) is
matched across processes only if that loop runs as many times on each. A list
display written in the file (``[Printer(), LossHistory()]``, no starred items)
has the same length everywhere; so has a variable or a ``self`` attribute every
assignment of which is such a display, or a parameter of a function of this
file that every call passes one (``self.callbacks = callbacks`` in ``__init__``,
``Trainer(model, opt, loader, [Printer(), LossHistory()])``), provided nothing
in the file changes its length (``.append``, ``+=``, a subscript assignment or
``del``: not followed, so refused).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

#: List methods that change a list's length.
_RESIZING = frozenset({"append", "extend", "insert", "pop", "remove", "clear"})


def fixed_length(
    index: ModuleIndex,
    iterable: cst.BaseExpression,
    depth: int = 0,
    via: frozenset[Key] = frozenset(),
) -> bool:
    """Does ``iterable`` hold the same number of items on every process?
    ``via``: the variables whose value it is (``self.callbacks = callbacks``)."""
    if isinstance(iterable, (cst.List, cst.Tuple)):
        return not any(isinstance(e, cst.StarredElement) for e in iterable.elements)
    key = index.key(iterable) if depth < 3 else None
    if key is None or not _only_iterated(index, key, via):
        return False
    values = index.values.get(key, [])
    if values:
        return all(
            v is not None and fixed_length(index, v, depth + 1, via | {key})
            for v in values
        )
    function = _parameter_of(index, iterable, key)
    if function is None:
        return False
    calls = index.call_sites(function)
    passed = [dict(index.arguments(call)).get(key) for call in calls]
    return bool(calls) and all(
        p is not None and fixed_length(index, p, depth + 1, via | {key}) for p in passed
    )


def _parameter_of(
    index: ModuleIndex, name: cst.BaseExpression, key: Key
) -> cst.FunctionDef | None:
    """The function of this file whose parameter ``name`` is."""
    if not isinstance(name, cst.Name):
        return None
    function = index.enclosing_function(name)
    if function is None or index.function_scope_key(function, name.value) != key:
        return None
    return function


def _only_iterated(index: ModuleIndex, key: Key, via: frozenset[Key]) -> bool:
    """Is the list ``key`` names only assigned, iterated over (``for cb in
    self.callbacks``) and declared as a parameter, or assigned whole to one of
    ``via``, or passed to a parameter among ``via``? Anything else (``.append``, ``+=``, a subscript, an alias that is
    changed, an attribute of the same name on another object) is not followed."""
    attribute = key[1].removeprefix("self.") if key[1].startswith("self.") else None
    for node in findall(index.module, m.Name() | m.Attribute()):
        found = index.key(node)
        if found != key:
            if (
                attribute is not None
                and found is None
                and isinstance(node, cst.Attribute)
                and node.attr.value == attribute
            ):
                return False  # `trainer.callbacks` outside the class: not followed
            continue
        parent = index.parent(node)
        if isinstance(parent, cst.AssignTarget) and parent.target is node:
            continue
        if isinstance(parent, cst.For) and parent.iter is node:
            continue
        if isinstance(parent, cst.Param) and parent.name is node:
            continue
        if (
            isinstance(parent, cst.Assign)
            and parent.value is node
            and all(index.key(t.target) in via for t in parent.targets)
        ):
            continue
        call = index.parent(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(call, cst.Call) and any(
            param in via and value is node for param, value in index.arguments(call)
        ):
            continue  # `Trainer(..., callbacks)`, whose parameter is followed
        return False
    return True
