"""AM033 printed-local-values: a training log line that shows one process's share of the batch.

## What
After the other rules have made the script's logged values global (AM008's
``accel.global_loss`` for losses and printed batch tensors, AM009's
``accel.reduce`` of metric sums, AM026's sample counts), a value printed in a
training loop (a loop whose step runs a backward) or in an evaluation loop over
a data loader that still differs between processes is reported: a Python number read from this process's share of the
batch (``acc = (out.argmax(1) == y).float().mean().item()``; ``print(acc)``),
a count of its samples (``len(x)``, ``n = y.numel()``), a running value of the
step's own tensors. Printed tensor reads (``x.item()``, AM008's), the logged
sample counts AM026 rewrites or reports (``batch_idx * len(data)``) and clock
readings (``time.time() - start``, or values computed from one: ``secs =
int(time.time() - start)``, ``mins = secs / 60``; each process's own time is as
right as the original's) are left out, and so is a value read only from a
variable the launcher sets per process (``rank = int(os.environ.get("RANK",
0))``: no share of the batch), and so are counts taken in a loop that
ranks the samples of each batch against each other (``right += 1`` after
``np.argmax(output)`` over an N-way trial: AM009 reports that loop, and no
combination of the processes' counts is the original's, so advice to combine
them would be false), and so is a file that another rule leaves unchanged
(nothing in it is split). Nothing is rewritten.

Where the value differs between processes for another reason than a split
batch, the finding says which: a random draw each process makes from its own
random state (``temperature = random.uniform(0.5, 1.5)``), or the batches of a
loop over a source that is not a loader accel-migrate splits (DPO's
``for batch in self.train_iterator`` over a generator of a local module: each
process takes whole batches, the original's where every process takes the same
ones), with advice to label it rather than to combine shares.

A print is one channel among those a script logs through (``log_channels``): a
tqdm bar's ``set_postfix`` / ``set_description``, ``logging`` and its loggers,
a TensorBoard writer, ``wandb.log``, MLflow, and a function of the file that logs
what it is given (``log_metrics(step, loss, acc)``, reported at its call in the
loop). The finding names the channel. A number set only from tensor reads that
AM008 reported already (``return loss.item()`` after the loop of its backward,
printed by the caller) is not reported again: one hazard, one finding.

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

from ..analysis import Key
from ..clock_readings import key_reads_clock
from ..divergence import TENSOR_READ
from ..file_tests import collective_note
from ..log_channels import channel
from ..metrics.batch_ranking import batch_ranking
from ..reduction.placement import code
from ..rule import Rule
from ..subtrees import findall
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
        through = channel(self.index, node)
        verb = "prints" if through == "print" else f"logs (in `{through}`)"
        unshared = self._not_a_share(
            node, [leaf for leaf in leaves if self._unowned(leaf, node)]
        )
        self.report(
            node,
            "needs-review",
            f"{verb} {names}, "
            + (
                unshared
                or "computed from this process's share of the batch: the main "
                "process shows its share's value where the original showed the "
                "whole batch's; combine it across processes (accel.global_loss "
                "of the tensor for a mean over samples, accel.reduce for a sum or "
                "a count) or label it as the main process's"
                + (
                    f"; combine it where every process goes, not here{note}"
                    if (note := collective_note(self, node))
                    else ""
                )
            ),
            # Of a file another rule leaves whole, nothing is split: not said.
            if_migrated=True,
        )

    def _not_a_share(self, node: cst.Call, leaves: list[cst.CSTNode]) -> str:
        """Why the printed values differ between processes where that is not
        this process's share of a split batch, as the rest of the finding: a
        random draw each process makes on its own, or the batches of a loop
        over a source that is not a loader accel-migrate splits (DPO's
        generator of batches: every process takes whole batches); "" where a
        value is read from a split batch, or where that is not known."""
        found = [self.index.rank_local_sources.of(leaf) for leaf in leaves]
        if any("data" in p.kinds for p in found):
            return ""
        if found and all(p.complete and p.kinds == {"random"} for p in found):
            draw = found[0].sources[0]
            where = draw.origin or f"`{code(draw.node)}`"
            return (
                f"computed from a random draw ({where}) that each process makes "
                "from its own random state, not from the batch: the main process "
                "shows its own draw's value, the original's only where every "
                "process draws alike (the same seed and the same draws before); "
                "label it as the main process's, or draw it alike on every process"
            )
        loop = self._data_loop(node)
        if loop is None or self.index.reads_loader(loop):
            return ""
        return (
            f"computed from the batches of `{code(loop.iter)}`, which "
            "accel-migrate does not split across processes (not a DataLoader "
            "that accel.prepare_dataloader wraps): each process computes it from "
            "the whole batches it takes itself, and the main process shows its "
            "own value, the original's where every process takes the same "
            "batches (a seeded or fixed order); label it as the main process's "
            "where they may differ"
        )

    def _data_loop(self, node: cst.Call) -> cst.For | None:
        """The innermost ``for`` around ``node``, in its function, that steps
        through data (not ``range(...)`` or a literal); None where there is none
        or a ``while`` comes first."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return None
            if isinstance(ancestor, cst.While) and not self.index.reads_no_data(
                ancestor
            ):
                return None
            if isinstance(ancestor, cst.For) and not self.index.reads_no_data(ancestor):
                return ancestor
        return None

    def _is_print(self, call: cst.Call) -> bool:
        return channel(self.index, call) is not None

    def _in_training_loop(self, call: cst.Call) -> bool:
        """Is ``call`` in a loop that runs a backward, or in a loop over a data
        loader (an evaluation's, whose batches are this process's share too)?"""
        for ancestor in self.index.ancestors(call):
            if isinstance(ancestor, (cst.For, cst.While)):
                return self.index.runs_backward(ancestor.body) or (
                    isinstance(ancestor, cst.For)
                    and self.index.loader_loop(ancestor.iter)[0]
                )
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
        if self._reported_at_read(leaf) or self._counted_over_ranking(leaf):
            return False
        if self._launcher_rank(leaf):
            return False
        return not self._clock_reading(self.index.key(leaf), set())

    def _launcher_rank(self, leaf: cst.CSTNode) -> bool:
        """Is ``leaf`` read only from a variable the launcher sets per process
        (``rank = int(os.environ.get("RANK", 0))``)? It is no share of the batch,
        and what the main process prints of it is its own rank."""
        found = self.index.rank_local_sources.of(leaf)
        return found.complete and found.kinds == {"environment"}

    def _counted_over_ranking(self, leaf: cst.CSTNode) -> bool:
        """Is ``leaf`` a variable counted up (``right += 1``) in a loop over a
        loader that ranks the samples of each batch against each other? AM009
        reports that loop (no combination of the processes' values is the
        original's), and AM006 the loader: advice to combine it would be false."""
        key = self.index.key(leaf)
        for aug in self.index.augmented.get(key, []) if key is not None else []:
            for ancestor in self.index.ancestors(aug):
                if (
                    isinstance(ancestor, cst.For)
                    and self.index.loader_loop(ancestor.iter)[0]
                    and batch_ranking(self.index, ancestor) is not None
                ):
                    return True
        return False

    def _clock_reading(self, key: Key | None, seen: set[Key]) -> bool:
        """Is a value of ``key`` read off the clock (``clock_readings``)? Each
        process's own reading is as right as the original's."""
        return key_reads_clock(self.index, self.qualnames, key, seen)

    def _reported_at_read(self, leaf: cst.CSTNode) -> bool:
        """Is ``leaf`` set only from tensor reads that AM008 reported already
        (``return loss.item()`` after the loop of its backward; ``last =
        train(epoch)``; ``print(last)``)? One hazard, one finding: the one at the
        read, which names the tensor."""
        reads = self._reads_of(leaf, depth=0)
        if not reads:
            return False
        reported = {
            (f.line, f.column)
            for f in self.context.findings
            if f.code == "AM008" and f.status == "needs-review"
        }
        for read in reads:
            line, column = self.original_start(read)
            if (line, column + 1) not in reported:
                return False
        return True

    def _reads_of(self, node: cst.CSTNode, depth: int) -> list[cst.CSTNode] | None:
        """The tensor reads a variable holds: each of its values a read
        (``x = loss.item()``), or a call of a function of the file each of whose
        returned values is one; None when any is something else."""
        key = self.index.key(node)
        values = self.index.values.get(key, []) if key is not None else []
        if not values or depth > 2:
            return None
        found: list[cst.CSTNode] = []
        for value in values:
            if value is None:
                return None
            if m.matches(value, TENSOR_READ):
                found.append(value)
                continue
            function = (
                self.index.local_function(value.func)
                if isinstance(value, cst.Call)
                else None
            )
            if function is None:
                return None
            returns = [
                r
                for r in findall(function.body, m.Return())
                if self.index.enclosing_function(r) is function
            ]
            if not returns:
                return None
            for ret in returns:
                returned = ret.value  # type: ignore[attr-defined]
                if returned is not None and m.matches(returned, TENSOR_READ):
                    found.append(returned)
                elif isinstance(returned, cst.Name):
                    inner = self._reads_of(returned, depth + 1)
                    if inner is None:
                        return None
                    found += inner
                else:
                    return None
        return found


def _formatted_item(node: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """Is ``node`` an argument of ``"...".format(...)``, an item of the tuple of
    ``"..." % (...)`` or a value of a dict of values (``wandb.log({...})``)?"""
    if isinstance(node, cst.Arg) and isinstance(parent, cst.Call):
        func = parent.func
        return isinstance(func, cst.Attribute) and func.attr.value == "format"
    if isinstance(node, cst.DictElement):
        return True  # `wandb.log({"acc": acc})`: the value shown is `acc`
    return isinstance(node, cst.Element) and isinstance(parent, cst.Tuple)
