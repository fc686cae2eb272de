"""AM033 printed-local-values: a training log line that shows one process's share of the batch.

## What
After the other rules have made the script's logged values global (AM008's
``accel.global_loss`` for losses and printed batch tensors, AM009's
``accel.reduce`` of metric sums, AM026's sample counts), a value printed in a
training loop (a loop whose step runs a backward) that still differs between
processes is reported: a Python number read from this process's share of the
batch (``acc = (out.argmax(1) == y).float().mean().item()``; ``print(acc)``),
a count of its samples (``len(x)``, ``n = y.numel()``), a running value of the
step's own tensors. Printed tensor reads (``x.item()``, AM008's), the logged
sample counts AM026 rewrites or reports (``batch_idx * len(data)``) and clock
readings (``time.time() - start``: each process's own time is as right as the
original's) are left out, and so is a file that another rule leaves
unchanged (nothing in it is split). Nothing is rewritten.

## Why
Each process trains on its share of every batch. What the main process prints
is then its share's value: at world 2 an accuracy over half the batch, a count
half the original's. The run trains as the original does, but its log does not
say what the original's said, and nothing else would tell.

## Example
```python
# before
acc = (out.argmax(1) == y).float().mean().item()
print(f"loss {loss.item():.4f} acc {acc:.3f}")
# after
acc = (out.argmax(1) == y).float().mean().item()
accel.print(f"loss {accel.global_loss(loss).item():.4f} acc {acc:.3f}")
# (reported as needs-review: `acc` is this process's share's)
```

## Fix safety
Report only: the rule does not know what the number means. Keep the tensor and
combine it where it is read (``accel.global_loss(acc_t).item()`` for a mean over
samples, ``accel.reduce(correct_t).item()`` for a sum), or say in the log that it
is the main process's share.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..divergence import CLOCK_PREFIXES, TENSOR_READ
from ..reduction.placement import code
from ..rule import Rule
from ..subtrees import findall
from .print_main_process import TQDM_WRITE
from .sample_counters import counted_batch, item_of


class PrintedLocalValues(Rule):
    code = "AM033"
    name = "printed-local-values"
    summary = (
        "a training log line printing this process's share of the batch -> "
        "reported (the original printed the whole batch's)"
    )
    #: After the rules that make logged values global (AM008, AM009, AM026).
    phase = 60

    def visit_Call(self, node: cst.Call) -> None:
        if not self._is_print(node) or not self._in_training_loop(node):
            return
        leaves = self.index.divergence.local_values.get(node, [])
        shown = list(
            dict.fromkeys(
                code(self._printed_part(leaf, node))
                for leaf in leaves
                if self._unowned(leaf, node)
            )
        )
        if not shown:
            return
        names = ", ".join(f"`{name}`" for name in shown)
        self.report(
            node,
            "needs-review",
            f"prints {names}, computed from this process's share of the batch: "
            "the main process shows its share's value where the original showed "
            "the whole batch's; combine it across processes (accel.global_loss "
            "of the tensor for a mean over samples, accel.reduce for a sum or a "
            "count) or label it as the main process's",
            # Of a file another rule leaves whole, nothing is split: not said.
            if_migrated=True,
        )

    def _is_print(self, call: cst.Call) -> bool:
        if self.index.is_runtime_call(call, "print"):
            return True
        names = self.qualnames(call.func)
        return "builtins.print" in names or not names.isdisjoint(TQDM_WRITE)

    def _in_training_loop(self, call: cst.Call) -> bool:
        for ancestor in self.index.ancestors(call):
            if isinstance(ancestor, (cst.For, cst.While)):
                return self.index.runs_backward(ancestor.body)
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
        return False

    def _printed_part(self, leaf: cst.CSTNode, at: cst.Call) -> cst.CSTNode:
        """The printed value that ``leaf`` is in: its f-string field, its argument
        of ``"...".format(...)`` or its item of ``"..." % (...)``, else the
        print's argument."""
        part, field = leaf, None
        for ancestor in self.index.ancestors(leaf):
            if ancestor is at:
                break
            if isinstance(ancestor, cst.FormattedStringExpression):
                return ancestor.expression
            parent = self.index.parent(ancestor)
            if isinstance(ancestor, cst.Arg) and parent is at:
                return field or ancestor.value
            if field is None and _formatted_item(ancestor, parent):
                field = ancestor.value  # type: ignore[attr-defined]
            part = ancestor
        return field or part

    def _counter_form(self, node: cst.CSTNode) -> bool:
        """AM026's forms, which it makes global or reports: a step counter times
        the batch's length (``batch_idx * len(data)``) and a loss read over it
        (``loss.item() / len(data)``)."""
        if not isinstance(node, cst.BinaryOperation):
            return False
        if isinstance(node.operator, cst.Multiply):
            pairs = ((node.left, node.right), (node.right, node.left))
            return any(
                isinstance(counter, cst.Name) and counted_batch(size, self.qualnames)
                for counter, size in pairs
            )
        if isinstance(node.operator, cst.Divide):
            return (
                counted_batch(node.right, self.qualnames) is not None
                and item_of(node.left) is not None
            )
        return False

    def _unowned(self, leaf: cst.CSTNode, at: cst.Call) -> bool:
        """Is the rank-local ``leaf`` (in the print ``at``) outside a tensor read
        (AM008's) and a sample count (AM026's), and not a clock reading?"""
        for ancestor in self.index.ancestors(leaf):
            if ancestor is at:
                break
            if m.matches(ancestor, TENSOR_READ):  # AM008's to make global or report
                return False
            if self._counter_form(ancestor):
                return False
        key = self.index.key(leaf)
        for value in self.index.values.get(key, ()) if key is not None else ():
            if value is None:
                continue
            for inner in findall(value, m.Call()):
                names = self.qualnames(inner.func)  # type: ignore[attr-defined]
                if any(n.startswith(CLOCK_PREFIXES) for n in names):
                    return False
        return True


def _formatted_item(node: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """Is ``node`` an argument of ``"...".format(...)`` or an item of the tuple
    of ``"..." % (...)``?"""
    if isinstance(node, cst.Arg) and isinstance(parent, cst.Call):
        func = parent.func
        return isinstance(func, cst.Attribute) and func.attr.value == "format"
    return isinstance(node, cst.Element) and isinstance(parent, cst.Tuple)
