"""Writes into a tensor kept across training steps, the fact AM032
(``batch_state_writes``) reports and AM009 defers to it: an in-place write, from
values of the step's batch, with no collective in its statement.

``kept_state_write`` asks it of one write. ``_StateWrites`` answers it, and
also whether an assignment is the running update of a variable that the step's
backpropagated loss reads (``running``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .analysis import variable_names
from .model_methods import reads_step_value, training_step
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex


_COLLECTIVE_PREFIXES = ("torch.distributed.", "accel_migrate.runtime.")


def kept_state_write(
    index: ModuleIndex, node: cst.CSTNode, name: cst.Name, parts: object, method: bool
) -> bool:
    """Is ``node`` (a write into ``name``, from ``parts``) an in-place write into a
    tensor kept across training steps, from values of the step's batch, with no
    collective in its statement? ``method``: an ``index_copy_``-like call (any
    object), else a ``name[...] = ...`` store (a tensor only)."""
    return _StateWrites(index).kept(node, name, parts, method)


class _StateWrites:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index

    def qualnames(self, node: cst.CSTNode) -> set[str]:
        return self.index.qualnames(node)

    def kept(
        self, node: cst.CSTNode, name: cst.Name, parts: object, method: bool
    ) -> bool:
        paths = [p for p in self.index.loop_paths(node) if training_step(self.index, p)]
        if not paths:
            return False
        step = paths[0][0]  # the innermost loop around the write
        trained = next(loop for loop in paths[0] if self.index.runs_backward(loop.body))
        if self._bound_in(name, step) or not self._kept(name, trained, method):
            return False  # a value of this step (`x[mask] = 0` on the batch)
        if not any(reads_step_value(self.index, part, step) for part in _nodes(parts)):
            return False
        return not self._through_collective(node)

    def running(self, node: cst.Assign, name: cst.Name) -> bool:
        """Is ``node`` (``name = f(name, batch values)``) the update of a variable
        kept across the steps of a training loop (bound before the loop in its
        function, rebound in it only from itself), from values of the step's
        batch, that the step's backpropagated loss reads?"""
        key = self.index.key(name)
        if key is None or not any(
            self.index.key(n) == key for n in variable_names(node.value)
        ):
            return False
        paths = [p for p in self.index.loop_paths(node) if training_step(self.index, p)]
        if not paths:
            return False
        step = paths[0][0]
        where = self.index.enclosing_function(step)
        if any(
            self.index.key(n) == key
            for loop in self.index.for_loops
            for n in variable_names(loop.target)
        ):
            return False  # a loop's target (`images = images.to(device)`)
        before = False
        for value in self.index.values.get(key, []):
            if value is None or self.index.enclosing_function(value) is not where:
                return False
            inside = any(a is step for a in self.index.ancestors(value))
            if inside and not any(
                self.index.key(n) == key for n in variable_names(value)
            ):
                return False  # set afresh in the step: a value of this step
            before |= not inside
        others = [n for n in variable_names(node.value) if self.index.key(n) != key]
        if not before or not any(reads_step_value(self.index, n, step) for n in others):
            return False  # (`weight = weight * 0.99`: nothing of the batch)
        return key in self._loss_reads(step) and not self._through_collective(node)

    def _loss_reads(self, step: cst.For | cst.While) -> set[object]:
        """The variables the losses backpropagated in ``step`` are computed from,
        following the assignments in the step (``loss = criterion(pred, target)``,
        ``target = (y - y_mean) / y_var.sqrt()``)."""
        todo: list[cst.CSTNode] = []
        for call in findall(
            step.body, m.Call(func=m.Attribute(attr=m.Name("backward")))
        ):
            assert isinstance(call, cst.Call)
            if self.index.is_runtime_call(call, "backward"):  # accel.backward(loss)
                todo += [a.value for a in call.args[:1]]
            elif self.index.qualnames(call.func) & {"torch.autograd.backward"}:
                todo += [a.value for a in call.args[:1]]
            else:  # loss.backward()
                todo.append(call.func.value)  # type: ignore[attr-defined]
        seen: set[object] = set()
        while todo:
            for inner in variable_names(todo.pop()):
                key = self.index.key(inner)
                if key is None or key in seen:
                    continue
                seen.add(key)
                todo += [
                    v
                    for v in self.index.values.get(key, [])
                    if v is not None and any(a is step for a in self.index.ancestors(v))
                ]
        return seen

    def _bound_in(self, name: cst.Name, loop: cst.For | cst.While) -> bool:
        """Is ``name`` (re)bound inside ``loop``, or by its target?"""
        key = self.index.key(name)
        if key is None:
            return True  # not known: say nothing
        values = self.index.values.get(key, [])
        if not values:
            return True
        for value in values:
            if value is None or any(a is loop for a in self.index.ancestors(value)):
                return True
        if isinstance(loop, cst.For):
            return any(self.index.key(n) == key for n in variable_names(loop.target))
        return False

    def _kept(self, name: cst.Name, loop: cst.For | cst.While, method: bool) -> bool:
        """Is ``name`` bound only before the training loop ``loop``, in its
        function (or at module level), and, for a ``name[...] = ...`` write, to
        a tensor (a ``torch`` call: not a dict or list of logged values)?"""
        key = self.index.key(name)
        values = self.index.values.get(key, []) if key is not None else []
        if not values:
            return False
        where = self.index.enclosing_function(loop)
        for value in values:
            if value is None:
                return False
            bound = self.index.enclosing_function(value)
            if bound is not where and bound is not None:
                return False  # bound in a function the step calls: fresh per call
            # (bound at module level: a global every step of the file reads)
            if any(a is loop for a in self.index.ancestors(value)):
                return False
            if not method and not any(
                q.startswith("torch.")
                for call in _calls(value)
                for q in self.qualnames(call.func)
            ):
                return False
        return True

    def _through_collective(self, node: cst.CSTNode) -> bool:
        statement = next(
            (a for a in self.index.ancestors(node) if isinstance(a, cst.BaseStatement)),
            node,
        )
        for call in _calls(statement):
            if any(
                q.startswith(_COLLECTIVE_PREFIXES) for q in self.qualnames(call.func)
            ):
                return True
        return False


def _nodes(parts: object) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    for part in parts:  # type: ignore[attr-defined]
        found.append(part.value if isinstance(part, cst.Arg) else part)
    return found


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    return list(findall(node, m.Call()))  # type: ignore[arg-type]
