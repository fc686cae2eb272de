"""Methods of the file's classes that keep what they are handed in the object.

RAFT's ``Logger.push(self, metrics)`` adds each ``metrics[key]`` into
``self.running_loss[key]`` and prints the running averages every few steps; a
training loop calls ``logger.push(metrics)`` with the batch's metrics. Such a
call collects per-batch values into an object made before the loop, as
``meter.update(v)`` does (``accumulators.collected_values``), whatever the
method is named: the method (a ``def`` of a class of this file, resolved by
``ModuleIndex.local_function``) adds a value read
from one of its parameters into the object's state (``self.x``, an item of
it): an increment (``+=``) or an ``append``/``extend``/``insert``/``add``/
``update`` of a container there; a plain assignment (pix2pix's ``set_input``
keeping the batch for the next forward) is no collection.
A method that runs a backward (a training step) keeps no handed values: it is
not one. What the object then does with them (running averages printed every
N steps, a log file) is not followed, so AM009 reports such a call rather than
rewriting it (``kept_values``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..index_syntax import parameter_names
from ..subtrees import findall

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: Methods that add a value to the container they are called on.
_ADDERS = frozenset({"append", "extend", "insert", "update", "add"})


def kept_values(index: ModuleIndex, loop: cst.For) -> Iterator[tuple[cst.Call, str]]:
    """Calls in ``loop`` (a loop over a sharded loader) that hand this process's
    values to a keeping method of an object made before the loop; with the
    call as written. Calls ``collected_values`` already yields (``update``,
    ``append``... of rank-local values) are left to it."""
    from .accumulators import _COLLECTORS, _held_by, _made_before

    divergence = index.divergence
    for call in findall(loop.body, m.Call(func=m.Attribute())):
        assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
        if call not in divergence.local_calls or (
            call.func.attr.value in _COLLECTORS and call in divergence.local_mutations
        ):
            continue
        receiver = _held_by(index, call.func.value)
        if _made_before(index, receiver, loop) and keeping_method(index, call):
            yield call, cst.Module([]).code_for_node(call)


def keeping_method(index: ModuleIndex, call: cst.Call) -> bool:
    """Does ``call`` run a method of a class of this file that adds a value
    read from one of its parameters into the object's state?"""
    method = index.local_function(call.func)
    if (
        method is None
        or not isinstance(call.func, cst.Attribute)
        or not _in_class(index, method)
        or index.runs_backward(method.body)
    ):
        return False
    params = parameter_names(method)
    if not params:
        return False
    for statement in findall(method.body, m.AugAssign()):
        # `self.running_loss[key] += metrics[key]`: a running sum; a plain
        # `self.real_A = input["A"]` (pix2pix's set_input) keeps the current
        # batch for the next forward, no collection
        value = statement.value  # type: ignore[attr-defined]
        if _of_self(statement.target) and _reads(value, params):  # type: ignore[attr-defined]
            return True
    for inner in findall(method.body, m.Call(func=m.Attribute())):
        func = inner.func  # type: ignore[attr-defined]
        if (
            func.attr.value in _ADDERS
            and _of_self(func.value)
            and any(_reads(a.value, params) for a in inner.args)  # type: ignore[attr-defined]
        ):
            return True
    return False


def _in_class(index: ModuleIndex, method: cst.FunctionDef) -> bool:
    block = index.parent(method)
    return isinstance(block, cst.IndentedBlock) and isinstance(
        index.parent(block), cst.ClassDef
    )


def _of_self(target: cst.BaseExpression) -> bool:
    """Is ``target`` ``self.x``, or an item or attribute of it?"""
    seen_attribute = False
    while isinstance(target, (cst.Attribute, cst.Subscript)):
        seen_attribute = seen_attribute or isinstance(target, cst.Attribute)
        target = target.value
    return seen_attribute and m.matches(target, m.Name("self"))


def _reads(value: cst.BaseExpression, params: set[str]) -> bool:
    return any(n.value in params for n in findall(value, m.Name()))  # type: ignore[attr-defined]
