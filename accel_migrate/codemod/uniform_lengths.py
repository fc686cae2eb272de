"""Lists whose length is the same on every process, though their items differ.

NCSN's ``test`` loops ``for i, sample in enumerate(all_samples)`` to save each
annealed Langevin sample with ``torch.save``, where ``all_samples`` is the list
``anneal_Langevin_dynamics`` returns: ``images = []``, one ``images.append(...)``
per step of loops over ``enumerate(sigmas)`` and ``range(n_steps_each)``. The
samples are drawn at random, so the divergence analysis marks the list (and the
loop's body) as rank-dependent; but how many turns the loop makes, which is
what a ``for`` decides, is the list's length, and that is fixed by loops every
process runs alike. AM028 asks ``uniform_length`` before it calls such a loop a
decision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: How far a name is followed back through variables and returns.
_DEPTH = 3
_WRAPPERS = frozenset({"builtins.enumerate", "builtins.reversed"})


def uniform_length(
    index: ModuleIndex, iterable: cst.BaseExpression, depth: int = 0
) -> bool:
    """Does ``iterable`` have as many items on every process: ``enumerate(x)``
    of such an ``x``, a name only ever bound to one, or the result of a local
    function that returns a list it fills with ``append`` in loops that run
    alike on every process (not under a condition)?"""
    if depth > _DEPTH:
        return False
    if isinstance(iterable, cst.Call):
        if index.qualnames(iterable.func) & _WRAPPERS:
            args = [a for a in iterable.args if a.keyword is None and not a.star]
            return bool(args) and uniform_length(index, args[0].value, depth + 1)
        target = index.callee(iterable)
        return target is not None and _returns_uniform_list(index, target[0])
    if not isinstance(iterable, cst.Name):
        return False
    key = index.key(iterable)
    values = index.values.get(key, []) if key is not None else []
    return bool(values) and all(
        v is not None and uniform_length(index, v, depth + 1) for v in values
    )


def _returns_uniform_list(index: ModuleIndex, function: cst.FunctionDef) -> bool:
    returns = findall(function.body, m.Return())
    if not returns:
        return False
    for ret in returns:
        value = ret.value  # type: ignore[attr-defined]
        if not isinstance(value, cst.Name) or not _filled_alike(index, function, value):
            return False
    return True


def _filled_alike(
    index: ModuleIndex, function: cst.FunctionDef, name: cst.Name
) -> bool:
    """``name`` is bound only to ``[]`` and grows only by ``name.append(...)``
    in loops whose bodies are the same on every process, under no ``if``."""
    key = index.key(name)
    values = index.values.get(key, []) if key is not None else []
    if not values or not all(
        isinstance(v, cst.List) and not v.elements for v in values
    ):
        return False
    divergent = index.divergence.divergent
    for reference in findall(function.body, m.Name(value=name.value)):
        if index.key(reference) != key:
            continue
        parent = index.parent(reference)
        if isinstance(parent, cst.Return):
            continue
        if isinstance(parent, cst.AssignTarget):
            continue  # `images = []`, checked above
        if not (
            isinstance(parent, cst.Attribute)
            and parent.value is reference
            and parent.attr.value == "append"
        ):
            return False  # handed on, extended, or popped: not followed
        for ancestor in index.ancestors(reference):
            if ancestor is function:
                break
            if isinstance(ancestor, (cst.If, cst.While, cst.Try)):
                return False
            if isinstance(ancestor, cst.For) and ancestor.body in divergent:
                return False
    return True
