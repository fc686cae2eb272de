"""AM026 sample-counters: a logged sample count ``batch_idx * len(data)`` counts the global batch.

## What
In a loop ``for batch_idx, (data, target) in enumerate(loader)`` over a prepared
data loader, a count of samples seen built from the step counter and the batch's
length (``batch_idx * len(data)``, ``batch_idx * data.size(0)``,
``batch_idx * data.shape[0]``) inside a print or a log call becomes
``batch_idx * accel.reduce(len(data))``: the length of the whole global batch,
summed over the processes. Where not every process reaches the line together,
the count is left alone and reported as needs-review.

## Why
Each process's batch is its share of the global batch, so ``len(data)`` is about
``1/N`` of the original's: pytorch/examples' MNIST log line ``[{}/{} ({:.0f}%)]``
printed ``[320/60000]`` where the original printed ``[640/60000]``. Multiplying by
the world size is wrong for a short last batch; the sum of the processes' shares
is the original's batch length exactly, in the default global-batch mode (and
the number of samples of the step in per-device mode).

## Example
```python
# before
for batch_idx, (data, target) in enumerate(train_loader):
    ...
    if batch_idx % args.log_interval == 0:
        print("[{}/{}]".format(batch_idx * len(data), len(train_loader.dataset)))
# after
for batch_idx, (data, target) in enumerate(train_loader):
    ...
    if batch_idx % args.log_interval == 0:
        accel.print("[{}/{}]".format(batch_idx * accel.reduce(len(data)), len(train_loader.dataset)))
```

## Fix safety
``accel.reduce`` is a collective: it is placed only where every process goes
(the divergence analysis; a step-counter condition such as ``batch_idx %
log_interval == 0`` is the same on every process). It costs one small
all-reduce per logged line. Elsewhere (under ``if rank == 0:``, a condition on
this process's data) the count is reported: it is this process's.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
import libcst.matchers as m

from ..batches import LoaderLoop, loader_loop
from ..file_tests import collective_note
from ..rule import Rule
from ..subtrees import findall

#: Calls whose arguments are logged: ``print``, the runtime's, ``logging``'s.
LOG_FUNCTIONS = frozenset(
    {"builtins.print", "accel_migrate.runtime.print"}
    | {f"logging.{n}" for n in ("debug", "info", "warning", "error", "log")}
)
#: Methods of loggers and progress bars.
LOG_METHODS = frozenset(
    {"info", "debug", "warning", "error", "log", "write", "set_description"}
)


class SampleCounters(Rule):
    code = "AM026"
    name = "sample-counters"
    summary = "logged batch_idx * len(data) -> batch_idx * accel.reduce(len(data))"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._loops: dict[cst.For, LoaderLoop | None] = {}
        self._rewrite: set[cst.BaseExpression] = set()

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            self._per_sample_loss(node)
            return
        if not isinstance(node.operator, cst.Multiply):
            return
        for counter, size in ((node.left, node.right), (node.right, node.left)):
            if not isinstance(counter, cst.Name):
                continue
            batch = counted_batch(size, self.qualnames)
            if batch is None:
                continue
            info = self._innermost_loop(node)
            if info is None or info.counter is None:
                return
            if self.index.key(counter) != info.counter:
                return
            if self.index.key(batch) not in info.batch or not self._logged(node):
                return
            if self.index.uniform(node):
                self._rewrite.add(size)
                self.report(
                    node,
                    "fixed",
                    "logged sample count: this process's batch is its share of the "
                    "global batch -> the global batch's length (accel.reduce)",
                )
            else:
                self.report(
                    node,
                    "needs-review",
                    "logged sample count from this process's batch "
                    f"(`{counter.value} * ...`): each process's batch is its share "
                    "of the global batch, and not every process reaches this line "
                    "together, so it cannot be summed here; it prints about 1/N of "
                    "the original's count" + collective_note(self, node),
                    if_migrated=True,
                )
            return

    def _per_sample_loss(self, node: cst.BinaryOperation) -> None:
        """``loss.item() / len(data)`` in a log: the loss becomes the global batch's
        (AM008), so the length must be the global batch's too."""
        batch = counted_batch(node.right, self.qualnames)
        loss = item_of(node.left)
        if loss is not None and self.index.is_runtime_call(loss, "global_loss"):
            # AM008 ran first: ``accel.global_loss(loss).item()``
            loss = loss.args[0].value if loss.args else None  # type: ignore[attr-defined]
        if batch is None or not isinstance(loss, cst.Name):
            return
        loop = self._enclosing_for(node)
        info = self._innermost_loop(node)
        if loop is None or info is None or self.index.key(batch) not in info.batch:
            return
        if self.index.key(loss) not in self._backward_losses(loop):
            return
        if not self._logged(node):
            return
        if self.index.uniform(node):
            self._rewrite.add(node.right)
            self.report(
                node,
                "fixed",
                "logged per-sample loss: the logged loss is the global batch's -> "
                "divided by the global batch's length (accel.reduce)",
            )
        else:
            self.report(
                node,
                "needs-review",
                "logged per-sample loss divided by this process's batch length: each "
                "process's batch is its share of the global batch, and not every "
                "process reaches this line together, so it cannot be summed here"
                + collective_note(self, node),
                if_migrated=True,
            )

    def _enclosing_for(self, node: cst.CSTNode) -> cst.For | None:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return None
            if isinstance(ancestor, cst.For):
                return ancestor
        return None

    def _backward_losses(self, loop: cst.For) -> set[object]:
        """The variables ``loss.backward()`` / ``accel.backward(loss)`` in the loop
        differentiate."""
        found: set[object] = set()
        for call in findall(loop.body, m.Call()):
            if not self.index.is_backward_call(call):
                continue
            func = call.func  # type: ignore[attr-defined]
            if isinstance(func, cst.Attribute) and func.attr.value == "backward":
                target = func.value
                if self.index.is_runtime_call(call, "backward") and call.args:  # type: ignore[attr-defined]
                    target = call.args[0].value  # type: ignore[attr-defined]
                key = self.index.key(target)
                if key is not None:
                    found.add(key)
        return found

    def _innermost_loop(self, node: cst.CSTNode) -> LoaderLoop | None:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return None
            if isinstance(ancestor, cst.For):
                if ancestor not in self._loops:
                    self._loops[ancestor] = loader_loop(self.index, ancestor)
                return self._loops[ancestor]
        return None

    def _logged(self, node: cst.CSTNode) -> bool:
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, cst.BaseSmallStatement | cst.BaseCompoundStatement):
                return False
            if isinstance(ancestor, cst.Call):
                if self.qualnames(ancestor.func) & LOG_FUNCTIONS:
                    return True
                if self.index.is_runtime_call(ancestor, "print"):
                    return True
                func = ancestor.func
                if isinstance(func, cst.Attribute) and func.attr.value in LOG_METHODS:
                    return True
        return False

    def leave_BinaryOperation(
        self, original_node: cst.BinaryOperation, updated_node: cst.BinaryOperation
    ) -> cst.BaseExpression:
        if original_node.left in self._rewrite:
            return updated_node.with_changes(left=self._reduced(updated_node.left))
        if original_node.right in self._rewrite:
            return updated_node.with_changes(right=self._reduced(updated_node.right))
        return updated_node

    def _reduced(self, size: cst.BaseExpression) -> cst.Call:
        return self.runtime_call("reduce", [cst.Arg(size)])


def item_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor read by ``loss.item()`` or ``float(loss)``."""
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value == "item" and not expr.args:
        return func.value
    if isinstance(func, cst.Name) and func.value == "float" and len(expr.args) == 1:
        return expr.args[0].value
    return None


def counted_batch(
    expr: cst.BaseExpression, qualnames: Callable[[cst.CSTNode], set[str]]
) -> cst.Name | None:
    """The batch whose length ``expr`` is: ``len(x)``, ``x.size(0)``, ``x.shape[0]``."""
    if isinstance(expr, cst.Call):
        func, args = expr.func, expr.args
        if (
            "builtins.len" in qualnames(func)
            and len(args) == 1
            and isinstance(args[0].value, cst.Name)
        ):
            return args[0].value
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "size"
            and isinstance(func.value, cst.Name)
            and len(args) == 1
            and isinstance(args[0].value, cst.Integer)
            and args[0].value.value == "0"
        ):
            return func.value
    if (
        isinstance(expr, cst.Subscript)
        and isinstance(expr.value, cst.Attribute)
        and expr.value.attr.value == "shape"
        and isinstance(expr.value.value, cst.Name)
        and len(expr.slice) == 1
    ):
        index = expr.slice[0].slice
        if (
            isinstance(index, cst.Index)
            and isinstance(index.value, cst.Integer)
            and index.value.value == "0"
        ):
            return expr.value.value
    return None
