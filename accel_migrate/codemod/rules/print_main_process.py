"""AM008 print-main-process: ``print`` runs on the main process; logged losses are global.

## What
- ``print(...)`` becomes ``accel.print(...)``, which prints on the main process
  only. Prints to ``sys.stderr`` and prints inside ``except`` blocks stay as they
  are: errors should show from whichever process has them.
- ``loss.item()`` (also ``loss.data.item()``, ``float(loss)``) of a tensor the
  script backpropagates, in the same loop as its ``backward``, becomes
  ``accel.global_loss(loss).item()``: the loss of the whole global batch, which
  is what the original script printed.

## Why
With N processes every ``print`` would appear N times, and each process's loss is
the loss of its share of the batch. ``global_loss`` combines the shares (weighted
by their sizes), so logs, running averages and loss-based decisions match the
original script's at every step.

## Example
```python
# before
if batch_idx % args.log_interval == 0:
    print(f"epoch {epoch} loss {loss.item():.6f}")
# after
if batch_idx % args.log_interval == 0:
    accel.print(f"epoch {epoch} loss {accel.global_loss(loss).item():.6f}")
```

## Fix safety
``global_loss`` is a collective: every process must reach it. It is only placed
where every process goes: not under a condition, loop or early exit that depends
on the process's own data, random numbers or the clock (see the divergence
analysis). Elsewhere the ``.item()`` is left as it is and reported as
needs-review: the value printed is then the main process's share.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..analysis import Key, attr_chain
from ..rule import Rule

_STRIPPED = {"data", "detach", "cpu", "clone", "float"}


class PrintMainProcess(Rule):
    code = "AM008"
    name = "print-main-process"
    summary = "print(...) -> accel.print(...); printed loss.item() -> global-batch loss"

    @cached_property
    def loss_loops(self) -> dict[Key, set[cst.CSTNode | None]]:
        """Backpropagated variables, and the innermost loop of each of their backward."""
        losses: dict[Key, set[cst.CSTNode | None]] = {}
        for call in self.index.calls:
            receiver: cst.BaseExpression | None = None
            if self.index.is_runtime_call(call, "backward") and call.args:
                receiver = call.args[0].value
            elif (
                isinstance(call.func, cst.Attribute)
                and call.func.attr.value == "backward"
            ):
                receiver = call.func.value
            key = self.index.key(receiver) if receiver is not None else None
            if key is not None:
                losses.setdefault(key, set()).add(self._loop(call))
        return losses

    def _loop(self, node: cst.CSTNode) -> cst.CSTNode | None:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)):
                return ancestor
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def _loss_tensor(self, node: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """Is ``node`` a backpropagated loss, read in the loop of its backward?

        Elsewhere (after the loop) the name may hold something else by then; a
        needs-review finding says so instead of guessing.
        """
        while isinstance(node, (cst.Attribute, cst.Call)):
            if (
                isinstance(node, cst.Call)
                and isinstance(node.func, cst.Attribute)
                and node.func.attr.value in _STRIPPED
                and not node.args
            ):
                node = node.func.value
            elif isinstance(node, cst.Attribute) and node.attr.value == "data":
                node = node.value
            else:
                break
        key = self.index.key(node)
        if key is None or key not in self.loss_loops:
            return False
        if self._loop(at) in self.loss_loops[key]:
            return True
        if self.index.enclosing_function(at) in {
            (
                self.index.enclosing_function(loop)
                if not isinstance(loop, cst.FunctionDef)
                else loop
            )
            for loop in self.loss_loops[key]
            if loop is not None
        }:
            self.report(
                at,
                "needs-review",
                "loss read outside the loop of its backward: it shows this process's share of the batch",
            )
        return False

    def _global(
        self, original: cst.CSTNode, receiver: cst.BaseExpression
    ) -> cst.BaseExpression | None:
        if not self.index.uniform(original):
            self.report(
                original,
                "needs-review",
                "loss read where only some processes may go (rank-dependent branch); it shows this process's share only",
            )
            return None
        self.report(
            original,
            "fixed",
            "logged loss -> accel.global_loss(loss) (the global-batch loss)",
        )
        return self.runtime_call("global_loss", [cst.Arg(value=receiver)])

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        func = original_node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "item"
            and not original_node.args
        ):
            if self._loss_tensor(func.value, original_node):
                updated_func = updated_node.func
                assert isinstance(updated_func, cst.Attribute)
                receiver = self._global(original_node, updated_func.value)
                if receiver is not None:
                    return updated_node.with_changes(
                        func=updated_func.with_changes(value=receiver)
                    )
            return updated_node
        names = self.qualnames(func)
        if "builtins.float" in names and len(original_node.args) == 1:
            if self._loss_tensor(original_node.args[0].value, original_node):
                receiver = self._global(original_node, updated_node.args[0].value)
                if receiver is not None:
                    return updated_node.with_changes(
                        args=[updated_node.args[0].with_changes(value=receiver)]
                    )
            return updated_node
        if "builtins.print" in names and self._main_only(original_node):
            self.report(
                original_node, "fixed", "print -> accel.print (main process only)"
            )
            return updated_node.with_changes(func=self.runtime_attr("print"))
        return updated_node

    def _main_only(self, node: cst.Call) -> bool:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "file":
                if attr_chain(arg.value) in {"sys.stderr", "stderr"}:
                    return False
        return not any(
            isinstance(a, cst.ExceptHandler) for a in self.index.ancestors(node)
        )
