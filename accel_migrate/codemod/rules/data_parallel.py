"""AM003 data-parallel: ``nn.DataParallel`` is removed; the strategy replicates the model.

## What
- ``model = nn.DataParallel(model, device_ids=...)`` is deleted, and so is an
  ``if torch.cuda.device_count() > 1:`` block that only wraps the model (and prints
  how many GPUs it found).
- ``nn.DataParallel(Net())`` inside a larger expression becomes ``Net()``.
- ``model.module`` on a model that was wrapped becomes ``model``, or
  ``accel.unwrap(model)`` where its class is asked for (``type(model.module)``,
  ``isinstance(model.module, C)``, ``model.module.__class__``).

## Why
``DataParallel`` runs one process that scatters each batch over the GPUs of one
machine. After migration every GPU has its own process and ``accel.prepare_model``
wraps the model for the chosen strategy (DDP or FSDP); keeping ``DataParallel``
would nest two kinds of parallelism and gather all outputs on one GPU.

## Example
```python
# before
model = Net().to(device)
if torch.cuda.device_count() > 1:
    print("Let's use", torch.cuda.device_count(), "GPUs!")
    model = nn.DataParallel(model)
torch.save(model.module.state_dict(), "net.pt")
# after
model = accel.prepare_model(Net().to(device))
torch.save(accel.state_dict(model), "net.pt")   # with AM004, AM010 and AM011
```

## Fix safety
Safe. ``device_ids`` and ``output_device`` lose their meaning: each process uses
its own GPU. Removing ``.module`` is safe because a prepared model's state dict
already has the unprefixed keys ``model.module.state_dict()`` produced.

``model.state_dict()`` of the wrapped model itself had DataParallel's keys
(``module.conv1.weight``). Where every run wrapped the model (the wrap is under
no ``if``, loop, ``try`` or ``with``, and is the model's last binding before the
call, in the same function), it becomes ``accel.state_dict(model,
prefix="module.")``: the original's keys, which code such as tsn-pytorch's
test_models.py strips by hand (``'.'.join(k.split('.')[1:])``). Elsewhere (a
wrap under ``if torch.cuda.device_count() > 1:``, whose keys depended on the
machine) the migrated model's keys are the plain ones (``conv1.weight``), and an
info finding says so at every such call.
``accel.load_state_dict`` accepts both, so the migrated script resumes from the
original's checkpoints; ``accel.state_dict(model, prefix="module.")`` writes the
original's format, for code that loads into a wrapped model.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import Key
from ..data_parallel_keys import always_wrapped
from ..names import DATA_PARALLEL_CALLS
from ..rule import Rule
from ..subtrees import findall


class DataParallel(Rule):
    code = "AM003"
    name = "data-parallel"
    summary = "nn.DataParallel(model) removed; model.module -> model"

    def applies(self) -> bool:
        # What it rewrites or reports starts at a DataParallel call (`_is_dp`:
        # the call, `wrapped`, the self-assignment, the `if` that only wraps).
        # Its leave_IndentedBlock fills a block it emptied; no rule before it
        # leaves one empty (AM001 fills its own).
        return self.originally_calls(DATA_PARALLEL_CALLS)

    def _is_dp(self, node: cst.CSTNode) -> bool:
        return self.is_call_to(node, DATA_PARALLEL_CALLS)

    def _contains_dp(self, node: cst.CSTNode | None) -> bool:
        return node is not None and any(
            self._is_dp(call) for call in findall(node, m.Call())
        )

    @cached_property
    def wrapped(self) -> set[Key]:
        """Variables that ever held a DataParallel model."""
        return {
            key
            for key, values in self.index.values.items()
            if any(self._contains_dp(v) for v in values)
        }

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self._is_dp(original_node):
            return self._key_format(original_node, updated_node)
        module = next(
            (
                a
                for a in updated_node.args
                if a.keyword is None or a.keyword.value == "module"
            ),
            None,
        )
        if module is None or module.star:
            self.report(
                original_node,
                "needs-review",
                "nn.DataParallel without a module argument",
            )
            return updated_node
        self.report(
            original_node,
            "fixed",
            "nn.DataParallel removed: the strategy replicates the model",
        )
        return module.value

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if original_node.attr.value != "module":
            return updated_node
        key = self.index.key(original_node.value)
        if key is None or key not in self.wrapped:
            return updated_node
        if self._asks_for_class(original_node):
            self.report(
                original_node,
                "fixed",
                "`.module` of a DataParallel model -> accel.unwrap(model) (its class is asked for)",
            )
            return self.runtime_call("unwrap", [cst.Arg(value=updated_node.value)])
        self.report(
            original_node,
            "fixed",
            "`.module` of a DataParallel model -> the model itself",
        )
        return updated_node.value

    def _key_format(self, call: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        """``model.state_dict()`` of a model that was wrapped: the original's keys
        had DataParallel's ``module.`` prefix. Where every run wrapped it
        (``data_parallel_keys``), the migrated script writes them so; elsewhere
        its keys are the plain ones, and an info finding says so."""
        func = call.func
        if not (
            isinstance(func, cst.Attribute)
            and func.attr.value == "state_dict"
            and not call.args
        ):
            return updated
        key = self.index.key(func.value)
        if key is None or key not in self.wrapped:
            return updated
        if always_wrapped(
            self.index, key, call, self._contains_dp, self.original_line
        ) and isinstance(updated.func, cst.Attribute):
            self.report(
                call,
                "fixed",
                "model.state_dict() of a model every run wrapped in DataParallel -> "
                'accel.state_dict(model, prefix="module."): the original\'s '
                "'module.'-prefixed keys (module.conv1.weight), for code that "
                "strips or expects that prefix",
            )
            prefix = cst.Arg(
                keyword=cst.Name("prefix"),
                value=cst.SimpleString('"module."'),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
            return self.runtime_call(
                "state_dict", [cst.Arg(value=updated.func.value), prefix]
            )
        self.report(
            call,
            "info",
            "the saved keys change: where the original wrapped the model in "
            "DataParallel, its state_dict() keys were 'module.'-prefixed "
            "(module.conv1.weight); the migrated script's are not. "
            "accel.load_state_dict reads both; accel.state_dict(model, "
            'prefix="module.") writes the original\'s',
        )
        return updated

    def _asks_for_class(self, node: cst.Attribute) -> bool:
        """``type(model.module)``, ``isinstance(model.module, C)``,
        ``model.module.__class__``: a prepared model's class is the runtime's."""
        parent = self.parent(node)
        if isinstance(parent, cst.Attribute):
            return parent.value is node and parent.attr.value == "__class__"
        if isinstance(parent, cst.Arg) and parent.keyword is None:
            call = self.parent(parent)
            return (
                isinstance(call, cst.Call)
                and call.args[0] is parent
                and self.is_call_to(call, {"builtins.type", "builtins.isinstance"})
            )
        return False

    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.SimpleStatementLine | cst.RemovalSentinel:
        if len(updated_node.body) == 1 and self._self_assignment(updated_node.body[0]):
            original = original_node.body[0]
            if isinstance(original, cst.Assign) and self._is_dp(original.value):
                return cst.RemovalSentinel.REMOVE
        return updated_node

    @staticmethod
    def _self_assignment(node: cst.BaseSmallStatement) -> bool:
        if not isinstance(node, cst.Assign) or len(node.targets) != 1:
            return False
        code = cst.Module([]).code_for_node
        return code(node.targets[0].target) == code(node.value)

    def leave_If(
        self, original_node: cst.If, updated_node: cst.If
    ) -> cst.BaseStatement | cst.RemovalSentinel:
        if original_node.orelse is None and self._only_wraps(original_node):
            return cst.RemovalSentinel.REMOVE
        return updated_node

    def _only_wraps(self, node: cst.If) -> bool:
        """An ``if`` whose body only wraps the model in DataParallel (and prints)."""
        if not isinstance(node.body, cst.IndentedBlock):
            return False
        wraps = False
        for statement in node.body.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                return False
            for small in statement.body:
                if isinstance(small, cst.Assign) and self._is_dp(small.value):
                    wraps = True
                elif not (
                    isinstance(small, cst.Expr)
                    and self.is_call_to(small.value, {"builtins.print"})
                ):
                    return False
        return wraps

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        if not updated_node.body:
            return updated_node.with_changes(body=[_pass()])
        return updated_node


def _pass() -> cst.SimpleStatementLine:
    return cst.SimpleStatementLine(body=[cst.Pass()])
