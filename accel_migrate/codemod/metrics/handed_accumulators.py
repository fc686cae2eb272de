"""Accumulators handed to a function of the file that adds into them.

usuyama/pytorch-unet's ``calc_loss(pred, target, metrics)`` adds each batch's
terms into the ``metrics`` dict its caller made before the loop over the
loader (``metrics['bce'] += bce.data.cpu().numpy() * target.size(0)``), and
the caller later divides them by ``epoch_samples``, a count it sums itself.
What the dict then holds is this process's share of the data; the increments
are in another function, so AM009 does not see them as sums of the loop.
Such a call is reported, and the dict's name counts as a term AM009 leaves
uncombined: the other term of a ratio with it (``epoch_samples``) is left
alone too, so the printed mean is this process's own rather than its share's
sum over the whole data's count (``ratios.py``).

A function "adds into" a parameter when its body has ``param[k] += ...`` /
``param.x += ...`` or calls an adding method on it (``param.append(...)``,
``param[k].update(...)``); a plain ``param[k] = v`` (keeping the last
value) is no accumulation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..index_syntax import bind_arguments
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: Methods that add a value to the container they are called on.
_ADDERS = frozenset({"append", "extend", "insert", "update", "add", "add_"})


def handed_accumulators(
    index: ModuleIndex, loop: cst.For
) -> Iterator[tuple[cst.Call, str, str]]:
    """Calls in ``loop``'s body of a function of this file that hand it a
    variable set before the loop, into which the function adds: (the call,
    the variable's name, the function's name)."""
    from .accumulators import _made_before

    for call in findall(loop.body, m.Call()):
        assert isinstance(call, cst.Call)
        found = index.callee(call)
        if found is None:
            continue
        function, bound = found
        if index.runs_backward(function.body):
            continue
        for parameter, argument in bind_arguments(function, bound, call):
            if not isinstance(argument, cst.Name):
                continue
            if (
                _made_before(index, argument, loop)
                and _collection(index, argument)
                and _adds_into(function, parameter)
            ):
                yield call, argument.value, function.name.value


#: Calls that make an empty collection to accumulate into.
_COLLECTIONS = frozenset(
    {
        "builtins.dict",
        "builtins.list",
        "builtins.set",
        "collections.defaultdict",
        "collections.OrderedDict",
        "collections.Counter",
    }
)


def _collection(index: ModuleIndex, argument: cst.Name) -> bool:
    """Is every value the variable is set to a collection (``{}``, ``[]``,
    ``defaultdict(float)``, ``dict()``)? An optimizer handed to a helper that
    scales ``optimizer.param_groups[0]["lr"] *= 0.5``, a model or another
    object is no accumulator of the batch's values."""
    key = index.key(argument)
    values = index.values.get(key, []) if key is not None else []
    if not values:
        return False
    for value in values:
        if isinstance(value, (cst.Dict, cst.List, cst.Set)):
            continue
        if isinstance(value, cst.Call):
            if index.qualnames(value.func) & _COLLECTIONS:
                continue
        return False
    return True


def _adds_into(function: cst.FunctionDef, parameter: str) -> bool:
    if _rebound(function, parameter):
        return False
    for aug in findall(function.body, m.AugAssign()):
        target = aug.target  # type: ignore[attr-defined]
        if (
            isinstance(target, (cst.Subscript, cst.Attribute))
            and _root(target) == parameter
        ):
            return True
    for inner in findall(function.body, m.Call(func=m.Attribute())):
        func = inner.func  # type: ignore[attr-defined]
        if func.attr.value in _ADDERS and _root(func.value) == parameter:
            return True
    return False


def _rebound(function: cst.FunctionDef, parameter: str) -> bool:
    """Is the parameter assigned anew in the function (then it adds into a
    container of its own, not the caller's)?"""
    for assign in findall(function.body, m.Assign()):
        for target in assign.targets:  # type: ignore[attr-defined]
            if m.matches(target.target, m.Name(parameter)):
                return True
    return False


def _root(node: cst.BaseExpression) -> str | None:
    while isinstance(node, (cst.Subscript, cst.Attribute)):
        node = node.value
    return attr_chain(node) if isinstance(node, cst.Name) else None
