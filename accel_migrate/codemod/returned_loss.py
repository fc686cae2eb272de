"""Which functions of a module return a loss they backpropagate, and where callers hold it.

A training step is often a method of its own (``Trainer._run_batch``: ``loss.backward()``,
then ``return loss``) and the loss is logged by its caller (``loss = self._run_batch(x, y)``;
``print(loss.item())``). The caller's variable is then a backpropagated loss of the
caller's loop, as much as if the backward were written there. Shared by the rules that
make logged and accumulated losses global (AM008, AM009), so that they agree.

Followed: ``return loss`` (also ``loss.detach()``, ``loss.data``), tuple returns
(``return loss, acc``: the caller's ``loss, acc = f(...)``), plain functions and
methods called through ``self``, and a function that returns what such a call returned
(``loss = self._run_batch(...)``; ``return loss``). A function with a return of anything
else (``return None``, another value) is not followed: the caller's value is not
always the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from .analysis import Key, _nodes_run_by, method_call

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: Methods of a tensor whose result is the same loss for logging.
_SAME_LOSS = frozenset({"detach", "clone"})


@dataclass(frozen=True)
class ReturnedLoss:
    """A function that returns a loss it backpropagates.

    ``position``: None when the whole return value is the loss, else its index in
    the returned tuple. ``value``: the loss expression of one ``return`` (for its
    reduction)."""

    function: cst.FunctionDef
    position: int | None
    value: cst.BaseExpression


def backpropagated(index: ModuleIndex, call: cst.Call) -> list[cst.BaseExpression]:
    """The tensors a backward call backpropagates: ``loss.backward()``,
    ``accel.backward(loss)``, ``scaler.scale(loss).backward()``,
    ``torch.autograd.backward([l1, l2])``."""
    receiver: cst.BaseExpression | None = None
    if index.is_runtime_call(call, "backward") and call.args:
        receiver = call.args[0].value
    elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward":
        receiver = call.func.value
    if (
        isinstance(receiver, cst.Call)
        and method_call(receiver, "scale")
        and len(receiver.args) == 1
    ):
        receiver = receiver.args[0].value  # a GradScaler left as it is
    if receiver is None and index.qualnames(call.func) & {
        "torch.autograd.backward",
        "torch.autograd.__init__.backward",
    }:
        receiver = call.args[0].value if call.args else None
    if isinstance(receiver, (cst.List, cst.Tuple)):
        return [e.value for e in receiver.elements]
    return [receiver] if receiver is not None else []


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    while True:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        elif (attribute := method_call(expr, *_SAME_LOSS)) is not None and not (
            expr.args  # type: ignore[attr-defined]
        ):
            expr = attribute.value
        else:
            return expr


class ReturnedLosses:
    """The loss-returning functions of one module and the callers' variables."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index

    @cached_property
    def _backpropagated(self) -> dict[cst.FunctionDef | None, set[Key]]:
        """Per function, the variables it backpropagates directly."""
        found: dict[cst.FunctionDef | None, set[Key]] = {}
        for call in self.index.calls:
            for tensor in backpropagated(self.index, call):
                key = self.index.key(tensor)
                if key is not None:
                    found.setdefault(self.index.enclosing_function(call), set()).add(
                        key
                    )
        return found

    @cached_property
    def _tables(
        self,
    ) -> tuple[dict[cst.FunctionDef, ReturnedLoss], dict[Key, cst.Call]]:
        functions: dict[cst.FunctionDef, ReturnedLoss] = {}
        bound: dict[Key, cst.Call] = {}
        changed = True
        while changed:  # a function returning what a loss-returning call returned
            changed = False
            for function in self.index.functions:
                if function in functions:
                    continue
                losses = self._backpropagated.get(function, set()) | {
                    k
                    for k, call in bound.items()
                    if self.index.enclosing_function(call) is function
                    and functions[self._callee(call)].position is None  # type: ignore[index]
                }
                found = self._returns(function, losses)
                if found is not None:
                    functions[function] = found
                    changed = True
            for call in self.index.calls:
                target = self._callee(call)
                if target is None or target not in functions:
                    continue
                for key in self._bindings(call, functions[target]):
                    if key not in bound:
                        bound[key] = call
                        changed = True
        return functions, bound

    def _callee(self, call: cst.Call) -> cst.FunctionDef | None:
        if self.index.local_class(call.func) is not None:
            return None  # a constructor returns the object
        target = self.index.callee(call)
        return target[0] if target is not None else None

    def _returns(
        self, function: cst.FunctionDef, losses: set[Key]
    ) -> ReturnedLoss | None:
        """The loss ``function`` returns, when every ``return`` of it returns the
        loss at one place."""
        if not losses:
            return None
        returns = [n for n in _nodes_run_by(function.body) if isinstance(n, cst.Return)]
        found: set[int | None] = set()
        value: cst.BaseExpression | None = None
        for ret in returns:
            if ret.value is None:
                return None
            if isinstance(ret.value, cst.Tuple):
                hits = [
                    (i, e.value)
                    for i, e in enumerate(ret.value.elements)
                    if not isinstance(e, cst.StarredElement)
                    and self.index.key(_unwrapped(e.value)) in losses
                ]
                if len(hits) != 1 or any(
                    isinstance(e, cst.StarredElement) for e in ret.value.elements
                ):
                    return None
                found.add(hits[0][0])
                value = hits[0][1]
            elif self.index.key(_unwrapped(ret.value)) in losses:
                found.add(None)
                value = ret.value
            else:
                return None
        if len(found) != 1 or value is None:
            return None
        return ReturnedLoss(function, found.pop(), value)

    def _bindings(self, call: cst.Call, returned: ReturnedLoss) -> list[Key]:
        parent = self.index.parent(call)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1):
            return []
        target = parent.targets[0].target
        if returned.position is None:
            key = self.index.key(target)
            return [key] if key is not None else []
        if isinstance(target, (cst.Tuple, cst.List)) and returned.position < len(
            target.elements
        ):
            if any(isinstance(e, cst.StarredElement) for e in target.elements):
                return []
            key = self.index.key(target.elements[returned.position].value)
            return [key] if key is not None else []
        return []

    # -- what the rules ask ------------------------------------------------------------
    def returned_by(self, call: cst.Call) -> ReturnedLoss | None:
        """The loss a call of a local function returns, if it returns one."""
        target = self._callee(call)
        return self._tables[0].get(target) if target is not None else None

    @cached_property
    def bound(self) -> dict[Key, cst.Call]:
        """Callers' variables that hold a returned loss, and the call they got it from
        (``loss = self._run_batch(...)``, ``loss, acc = step(...)``)."""
        return dict(self._tables[1])

    def call_of(self, key: Key) -> cst.Call | None:
        return self._tables[1].get(key)

    @cached_property
    def companions(self) -> dict[Key, cst.Call]:
        """The other values a loss-returning call returns with its loss
        (``acc`` in ``loss, acc = self.step(x, y)``), and that call."""
        found: dict[Key, cst.Call] = {}
        for call in self.index.calls:
            returned = self.returned_by(call)
            parent = self.index.parent(call)
            if (
                returned is None
                or returned.position is None
                or not isinstance(parent, cst.Assign)
                or len(parent.targets) != 1
                or not isinstance(parent.targets[0].target, (cst.Tuple, cst.List))
            ):
                continue
            for i, element in enumerate(parent.targets[0].target.elements):
                key = self.index.key(element.value)
                if i != returned.position and key is not None:
                    found[key] = call
        return found
