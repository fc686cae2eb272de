"""AM014 grad-scaler: torch's ``GradScaler(...)`` becomes ``accel.grad_scaler(...)``.

## What
Rewrites ``torch.amp.GradScaler(...)``, ``torch.cuda.amp.GradScaler(...)`` and
``torch.cpu.amp.GradScaler(...)`` (any import spelling) into
``accel.grad_scaler(...)``, keeping ``enabled=`` (made a keyword when it was
positional) and dropping the device. AM007, which runs first, has made the
script's ``scaler.scale(loss).backward()`` into ``accel.backward(scaler.scale(loss))``;
this rule makes it ``accel.backward(loss)``. The script's other calls stay as
they are and go to
the runtime's object: ``scaler.step(optimizer)``, ``scaler.update()``,
``scaler.unscale_(optimizer)``, ``scaler.get_scale()``, ``scaler.is_enabled()``,
``scaler.state_dict()``, ``scaler.load_state_dict(...)``. The scaler is followed
through aliases, ``self`` attributes and arguments of this file's functions;
``scaler = GradScaler() if args.amp else None`` is recognised, and so are tests
such as ``if scaler is not None``.

## Why
Under ``--precision fp16`` the runtime scales the loss in ``accel.backward`` and
unscales, checks and skips in the prepared optimizer's ``step``. The script's own
GradScaler would scale a second time (a loss scale of 2**32 that overflows and
skips steps), and its ``unscale_``/``step`` would not see the runtime's scale.
``accel.grad_scaler`` keeps the script's calls working against the run's
precision: ``scale()`` returns the loss unchanged (the runtime scales once),
``step`` steps the prepared optimizer (skipped on inf/NaN), ``unscale_`` unscales
before clipping, ``update`` does nothing (the runtime updates the scale),
``state_dict`` is the runtime's loss scale. It also checks the script's switch:
``enabled=False`` in an fp16/bf16 run stops with an error that says so.

## Example
```python
# before
scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
# after
scaler = accel.grad_scaler(enabled=args.amp)
accel.backward(loss)
scaler.step(optimizer)
scaler.update()
```

## Fix safety
Safe where it is rewritten: the loss is scaled once, by the runtime, and the
script's unscale/step/update sequence keeps its meaning. The rule proves it
first: every use of the scaler must be one of the calls above, on an optimizer
built in this file. Otherwise the scaler is left as it is and reported as
needs-review, with the use that stopped it: a scaler passed to a function of
another module, returned, kept in a container, a method the runtime's object
does not have, ``scaler.scale(loss)`` whose result is stored or used other than
by ``accel.backward`` (also a ``scaler.scale(loss).backward()`` that AM007 left as
it is, or was not selected to rewrite), or ``scaler.step(x)`` on an optimizer the
file does not build. A statement marked ``# accel-migrate: skip`` that uses the
scaler leaves it as it is too, so that its ``scale`` and ``step`` stay a pair. A scaler left as it is still works in fp32 and bf16 runs; under fp16 its
scaling would come on top of the runtime's.

Also reported as needs-review, while the rewrite is made: ``init_scale=`` and
the other scaling settings (the runtime's loss scaling starts at 2**16, doubles
after 2000 clean steps and halves on overflow, like GradScaler's defaults), and
``scaler.load_state_dict(...)``: a checkpoint written by the original script's
GradScaler has other keys than the runtime's loss scale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from ..amp import (
    GRAD_SCALER,
    SCALER_SETTINGS,
    amp_api,
    bind,
    enabled_keyword,
)
from ..analysis import Key, variable_names
from ..names import is_optimizer_class
from ..optimizer_lookups import looked_up_optimizer
from ..optimizer_subclasses import local_optimizer_classes
from ..rule import Rule
from ..scaler_uses import ScalerUses, short


@dataclass
class _Plan:
    #: GradScaler calls to rewrite.
    rewrite: set[cst.Call] = field(default_factory=set)
    #: ``scaler.scale(x)`` calls that are backpropagated: they become ``x``.
    strip: set[cst.Call] = field(default_factory=set)
    #: Needs-review findings: (node, message).
    review: list[tuple[cst.CSTNode, str]] = field(default_factory=list)


@dataclass
class _Group:
    """Constructors whose scalers may meet in one variable, and those variables."""

    constructors: list[cst.Call]
    keys: set[Key]
    problems: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    notes: list[tuple[cst.CSTNode, str]] = field(default_factory=list)
    strip: set[cst.Call] = field(default_factory=set)


class GradScalerRule(ScalerUses, Rule):
    code = "AM014"
    name = "grad-scaler"
    summary = "GradScaler(...) -> accel.grad_scaler(...); scaler.scale(loss).backward() -> accel.backward(loss)"

    def applies(self) -> bool:
        # Its plan (all it reports and rewrites) starts at GradScaler calls.
        return self.originally_calls(GRAD_SCALER)

    # -- analysis --------------------------------------------------------------------------
    @cached_property
    def plan(self) -> _Plan:
        plan = _Plan()
        constructors = [
            call
            for call in self.index.calls
            if (found := amp_api(self.index, call)) and found[0] == "grad_scaler"
        ]
        for group in self._groups(constructors):
            self._check(group)
            if group.problems:
                plan.review.extend(group.problems)
                first = group.problems[0][0]
                line = self._line(first)
                for constructor in group.constructors:
                    if constructor is first:
                        continue  # the problem is reported there already
                    plan.review.append(
                        (
                            constructor,
                            f"GradScaler left as it is (see line {line}): under --precision fp16 its scaling would come on top of the runtime's",
                        )
                    )
            else:
                plan.rewrite.update(group.constructors)
                plan.strip |= group.strip
                plan.review.extend(group.notes)
        return plan

    def _line(self, node: cst.CSTNode) -> int:
        return self.original_line(node)

    def _groups(self, constructors: list[cst.Call]) -> list[_Group]:
        groups: list[_Group] = []
        for constructor in constructors:

            def seed(expr: cst.BaseExpression, c: cst.Call = constructor) -> bool:
                return expr is c or (
                    isinstance(expr, cst.IfExp) and c in (expr.body, expr.orelse)
                )

            keys = self.index.tagged(seed)
            merged = _Group([constructor], set(keys))
            for group in [g for g in groups if g.keys & keys]:
                groups.remove(group)
                merged.constructors = group.constructors + merged.constructors
                merged.keys |= group.keys
            groups.append(merged)
        return groups

    @cached_property
    def optimizer_classes(self) -> set[cst.ClassDef]:
        return local_optimizer_classes(self.index)

    @cached_property
    def optimizers(self) -> set[Key]:
        # also `optimizer, scheduler = fetch_optimizer(args, model)` of a function
        # of this file returning the optimizer it builds (RAFT's train.py)
        return self.index.tagged(self._builds_optimizer, returns=True)

    def _builds_optimizer(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        if self.index.is_runtime_call(expr, "prepare_optimizer"):
            return True
        if self.index.local_class(expr.func) in self.optimizer_classes:
            return True
        if looked_up_optimizer(self.index, expr):
            return True
        return any(is_optimizer_class(q) for q in self.index.qualnames(expr.func))

    def _holds_scaler(self, expr: cst.BaseExpression | None, group: _Group) -> bool:
        if expr is None:
            return False
        if isinstance(expr, cst.Name) and expr.value == "None":
            return True
        if expr in group.constructors or self.index.is_runtime_call(
            expr, "grad_scaler"
        ):
            return True
        if isinstance(expr, cst.IfExp):
            return self._holds_scaler(expr.body, group) and self._holds_scaler(
                expr.orelse, group
            )
        return self.index.key(expr) in group.keys

    def _check(self, group: _Group) -> None:
        for constructor in group.constructors:
            self._check_constructor(constructor, group)
        for key in group.keys:
            for value in self.index.values.get(key, ()):
                if value is not None and not self._holds_scaler(value, group):
                    group.problems.append(
                        (
                            value,
                            f"`{key[1]}` also holds `{short(value)}`, not only a GradScaler",
                        )
                    )
        for call in self.index.calls:
            for key, arg in self.index.arguments(call):
                if key in group.keys and not self._holds_scaler(arg, group):
                    group.problems.append(
                        (
                            arg,
                            f"the scaler parameter `{key[1]}` also receives `{short(arg)}`",
                        )
                    )
        references = self._references(group.keys)
        for reference in references:
            self._check_use(reference, group)
        for node in [*group.constructors, *references]:
            if self._skipped(node):
                group.problems.append(
                    (
                        node,
                        "a use of the scaler is marked `# accel-migrate: skip`: the scaler is left as it is everywhere, so that its scale() and step() stay a pair",
                    )
                )
                break

    def _skipped(self, node: cst.CSTNode) -> bool:
        """Inside a statement marked ``# accel-migrate: skip`` (not visited)."""
        suppressed = getattr(self, "_suppressed", frozenset())
        return bool(suppressed) and any(
            id(n) in suppressed for n in (node, *self.index.ancestors(node))
        )

    def _check_constructor(self, constructor: cst.Call, group: _Group) -> None:
        qualname = next(q for q in self.qualnames(constructor.func) if q in GRAD_SCALER)
        bound = bind(constructor, GRAD_SCALER[qualname])
        if bound is None:
            group.problems.append(
                (
                    constructor,
                    "GradScaler(*args/**kwargs) left as it is: cannot read its arguments",
                )
            )
            return
        settings = [name for name in SCALER_SETTINGS if name in bound]
        if settings:
            group.notes.append(
                (
                    constructor,
                    f"{', '.join(settings)} dropped: the runtime's loss scaling starts at 2**16, doubles after 2000 clean steps and halves on overflow",
                )
            )
        expr: cst.CSTNode = constructor
        parent = self.parent(constructor)
        if isinstance(parent, cst.IfExp) and parent.test is not constructor:
            expr, parent = parent, self.parent(parent)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is expr:
            return
        if (
            isinstance(parent, cst.Arg)
            and not parent.star
            and isinstance(call := self.parent(parent), cst.Call)
            and any(
                key in group.keys and arg is expr
                for key, arg in self.index.arguments(call)
            )
        ):
            return
        group.problems.append(
            (
                constructor,
                "GradScaler left as it is: it is not kept in a variable of this file (returned, or passed to code the rule cannot see)",
            )
        )

    def _references(self, keys: set[Key]) -> list[cst.BaseExpression]:
        found: list[cst.BaseExpression] = [
            name
            for name in variable_names(self.wrapper.module)
            if self.index.key(name) in keys
        ]
        for attribute in _self_attributes(self.wrapper.module):
            if self.index.key(attribute) in keys:
                found.append(attribute)
        return found

    # -- reporting and rewriting -------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        for where, message in self.plan.review:
            self.report(where, "needs-review", message)

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if original_node in self.plan.rewrite:
            return self._rewrite(original_node, updated_node)
        if original_node in self.plan.strip:
            return self._strip(original_node, updated_node)
        return updated_node

    def _rewrite(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        qualname = next(
            q for q in self.qualnames(original_node.func) if q in GRAD_SCALER
        )
        bound = bind(original_node, GRAD_SCALER[qualname]) or {}
        args = []
        if "enabled" in bound:
            args.append(enabled_keyword(updated_node.args[bound["enabled"]]))
        self.report(
            original_node,
            "fixed",
            "GradScaler -> accel.grad_scaler: the run's precision scales the loss, once",
        )
        return self.runtime_call("grad_scaler", args)

    def _strip(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        """``accel.backward(scaler.scale(loss))`` -> ``accel.backward(loss)``."""
        self.report(
            original_node,
            "fixed",
            "accel.backward(scaler.scale(loss)) -> accel.backward(loss): the runtime scales the loss, once",
        )
        return updated_node.args[0].value


def _self_attributes(module: cst.Module) -> list[cst.Attribute]:
    found: list[cst.Attribute] = []

    class _Attributes(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                found.append(node)

    module.visit(_Attributes())
    return found
