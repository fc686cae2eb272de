"""The uses of a GradScaler variable in AM014 (``grad_scaler``): each reference
is a definition, an argument of a function of this file (followed), a test
(``if scaler``, ``scaler is not None``) or a call of a method the runtime's
object has (``scale`` only as backpropagated through ``accel.backward``,
``step`` only of an optimizer built in this file); anything else is a problem
that leaves the scaler as it is everywhere.

A mixin of the rule: it reads the rule's ``index``, ``parent``,
``_builds_optimizer`` and ``optimizers``, and writes a group's ``problems``,
``notes`` and ``strip``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .amp import bind, code

if TYPE_CHECKING:
    from .rules.grad_scaler import _Group

#: GradScaler methods that the runtime's object has.
_METHODS = frozenset(
    {
        "scale",
        "step",
        "update",
        "unscale_",
        "get_scale",
        "is_enabled",
        "state_dict",
        "load_state_dict",
    }
)


class ScalerUses:
    """AM014's checks of the uses of a scaler variable."""

    def _check_use(self, ref: cst.BaseExpression, group: _Group) -> None:
        parent = self.parent(ref)
        if isinstance(parent, (cst.AssignTarget, cst.Param, cst.NameItem)):
            return  # a definition
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and ref in (
            parent.value,
            getattr(parent, "target", None),
        ):
            return  # a definition, or an alias (followed)
        if isinstance(parent, cst.Arg) and parent.value is ref:
            call = self.parent(parent)
            if (
                not parent.star
                and isinstance(call, cst.Call)
                and any(arg is ref for _, arg in self.index.arguments(call))
            ):
                return  # an argument of a function of this file: followed
            callee = code(call.func) if isinstance(call, cst.Call) else "a call"
            group.problems.append(
                (
                    ref,
                    f"the scaler is passed to `{callee}`, which this file does not define",
                )
            )
            return
        if isinstance(parent, cst.Attribute) and parent.value is ref:
            self._check_method(ref, parent, group)
            return
        if self._tested(ref, parent):
            return
        group.problems.append(
            (ref, f"the scaler is used as a value here: `{short(parent)}`")
        )

    def _tested(self, ref: cst.BaseExpression, parent: cst.CSTNode | None) -> bool:
        """``if scaler``, ``scaler is not None``, ``not scaler``, ``scaler and ...``."""
        if isinstance(parent, (cst.If, cst.While, cst.IfExp)):
            return parent.test is ref
        if isinstance(parent, cst.BooleanOperation):
            return True
        if isinstance(parent, cst.UnaryOperation):
            return isinstance(parent.operator, cst.Not)
        if isinstance(parent, cst.ComparisonTarget):
            return isinstance(parent.operator, (cst.Is, cst.IsNot))
        if isinstance(parent, cst.Comparison):
            return all(
                isinstance(t.operator, (cst.Is, cst.IsNot)) for t in parent.comparisons
            )
        return False

    def _check_method(
        self, ref: cst.BaseExpression, attribute: cst.Attribute, group: _Group
    ) -> None:
        method = attribute.attr.value
        call = self.parent(attribute)
        if not (isinstance(call, cst.Call) and call.func is attribute):
            group.problems.append(
                (attribute, f"`{code(attribute)}` is read without calling it")
            )
            return
        if method not in _METHODS:
            group.problems.append(
                (
                    call,
                    f"`{code(attribute)}()`: accel.grad_scaler's object has no `{method}`",
                )
            )
            return
        if method == "scale":
            self._check_scale(call, group)
        elif method == "step":
            self._check_step(call, group)
        elif method == "load_state_dict":
            group.notes.append(
                (
                    call,
                    "scaler.load_state_dict(): a checkpoint written by the original script's GradScaler has other keys than the runtime's loss scale; resume from checkpoints written by the migrated script",
                )
            )

    def _check_scale(self, call: cst.Call, group: _Group) -> None:
        if bind(call, ("outputs",)) != {"outputs": 0}:
            group.problems.append(
                (call, f"`{short(call)}`: expected scaler.scale(loss)")
            )
            return
        outer = self.parent(call)
        if (
            isinstance(outer, cst.Attribute)
            and outer.value is call
            and outer.attr.value == "backward"
            and isinstance(backward := self.parent(outer), cst.Call)
            and backward.func is outer
        ):
            group.problems.append(
                (
                    backward,
                    "scaler.scale(loss).backward() was not made accel.backward (AM007 left it, or was not selected): the runtime's scale() would not scale it",
                )
            )
            return
        if (
            isinstance(outer, cst.Arg)
            and isinstance(backward := self.parent(outer), cst.Call)
            and self.index.is_runtime_call(backward, "backward")
            and backward.args[0] is outer
        ):
            group.strip.add(call)  # accel.backward(scaler.scale(loss)), from AM007
            return
        group.problems.append(
            (
                call,
                f"the result of `{short(call)}` is kept or used other than by backward: accel.grad_scaler's scale() returns the loss unscaled (accel.backward scales it)",
            )
        )

    def _check_step(self, call: cst.Call, group: _Group) -> None:
        bound = bind(call, ("optimizer",))
        optimizer = (
            call.args[bound["optimizer"]].value
            if bound is not None and "optimizer" in bound
            else None
        )
        if optimizer is not None and (
            self._builds_optimizer(optimizer)
            or self.index.holds_tagged(optimizer, self.optimizers)
        ):
            return
        what = f"`{short(optimizer)}`" if optimizer is not None else "its argument"
        group.problems.append(
            (
                call,
                f"scaler.step(): {what} is not an optimizer built in this file, so it may not be prepared (its step would not unscale)",
            )
        )


def short(node: cst.CSTNode | None, limit: int = 60) -> str:
    text = " ".join(code(node).split()) if node is not None else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."
