"""AM008 print-main-process: ``print`` runs on the main process; logged losses are global.

## What
- ``print(...)`` becomes ``accel.print(...)``, which prints on the main process
  only. Prints to ``sys.stderr`` and prints inside ``except`` blocks stay as they
  are: errors should show from whichever process has them. ``tqdm.write(...)``
  (a print that clears and redraws the progress bars) becomes
  ``accel.on_main_process(tqdm.write, ...)``. A progress line of the
  ``logging`` module (``logging.info(...)``, ``logger.debug(...)`` of ``logger =
  logging.getLogger(...)``, loguru's ``logger.info``) becomes
  ``accel.on_main_process(logger.info, ...)``; warnings and errors, and log calls
  in ``except`` blocks, stay on every process.
- ``loss.item()`` (also ``loss.data.item()``, ``float(loss)``,
  ``loss.data.cpu().numpy()``) of a tensor the
  script backpropagates, in the same loop as its ``backward``, becomes
  ``accel.global_loss(loss).item()``: the loss of the whole global batch, which
  is what the original script printed (``scaler.scale(loss)`` backpropagates
  ``loss``). Through a copy (``.cpu()``, ``.clone()``, ``.float()``) the loss
  itself is made global, then copied (``accel.global_loss(loss).data.cpu()
  .numpy()``): the runtime knows the loss of ``accel.backward`` by its identity
  and storage, and would take a copy for another tensor, a mean. A sum of such losses made in that loop and only logged
  (``errD = errD_real + errD_fake``) counts as one. So does each term of a
  backpropagated sum, logged on its own (``rec`` and ``kld`` of ``loss = rec +
  kld``; ``losses["cls"]`` of ``loss = sum(losses.values())``, also in a loop over
  a literal or the dict's keys), combined with its own reduction
  (``reduction="sum"``, ``count=``); a term whose reduction is unknown is
  reported. A read of a loss whose backward AM007 reports with an unknown
  reduction (annotated-transformer's ``loss_node`` of a handed loss-compute
  object) is made global too, as needs-review, not fixed: ``global_loss``
  combines it as ``accel.backward`` weighs it, as a mean over samples, which the
  rule cannot show it is. A loss times the batch size
  (``total += loss.item() * x.size(0)``) is a sum over samples, which AM009
  combines. A backpropagated expression (``(loss / ntokens).backward()``) read
  again in the same loop (``(loss / ntokens).item()``) is the same loss, combined
  with its reduction (``count=ntokens`` for a token mean). A read in a loop nested
  in that loop counts as one in it where the inner loop runs as often on every
  process: over a literal, a dict's keys, or a list of the file that no statement
  grows or changes (``for cb in self.callbacks: cb.on_batch_end(step,
  loss.item())``, ``self.callbacks = callbacks`` from ``Trainer(...,
  [Printer(), LossHistory()])``); over anything else it is reported.
- Another tensor of the batch read in a print of that loop, or of a loop over
  a data loader that runs no backward (an evaluation's ``print(dist.mean().item())``)
  (``acc.item()``, ``ntokens.item()``: a value computed from this process's
  share, by the divergence analysis) is combined as it reduces the batch, so that the main
  process prints the whole batch's value as the original did: a mean over
  samples (``(out.argmax(1) == y).float().mean()``) becomes
  ``accel.global_loss(acc).item()``, a masked mean gets its ``count=``, a sum
  (``(pred == y).sum()``) becomes ``accel.reduce(correct).item()``. A value that
  no explicit reduction says is a mean or a sum (``out.max()``, ``out[0, 0]``) is
  reported, not taken for a mean over samples as a loss would be. The same holds
  wherever the script shows the value, not only in a print (``log_channels``): a
  tqdm bar's ``set_postfix`` / ``set_description``, ``logging`` and its loggers,
  a TensorBoard writer's ``add_scalar(s)``, ``wandb.log`` / ``run.log``, MLflow's
  ``log_metric(s)``, and a function of the file that logs what it is given and
  returns nothing (``log_metrics(step, loss.item(), acc.item())``). The finding
  names the channel. In a file that holds no data loader, a value read in
  loops that read no data (NeRF's rays sliced out of a tensor, AM019's case)
  is the same on every process: printed on the main process, not combined
  (``unsplit_steps``).
- A loss stored on the instance (``self.loss_G``, backpropagated in
  ``backward_G``, a pix2pix-style model class) and read in another method
  (``float(getattr(self, "loss_" + name))`` in ``get_current_losses``, or
  ``self.loss_G.item()``) is reported: it is this process's share, read where the
  rule cannot show every process goes.
- A loss that a function of the file backpropagates and returns (``Trainer._run_batch``:
  ``loss.backward()``; ``return loss``, also ``return loss, acc``) is a loss of the
  caller's loop: ``loss = self._run_batch(x, y)``; ``print(loss.item())`` (or
  ``self._run_batch(x, y).item()``) reads ``accel.global_loss(loss)``, with
  ``reduction="sum"`` when the returned loss sums over its batch. The other values
  returned with it (``acc``) are reported when read: the rule does not know how they
  reduce. A comparison of the returned loss tensor (``if loss < best:``) is reported:
  it decides on this process's share.

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
analysis). A branch on a loss read that is made global (``if loss.item() < best:``)
is the same on every process, so reads inside it are made global too. Elsewhere
the ``.item()`` is left as it is and reported as needs-review: the value printed
is then the main process's share. A log call routed to the main process
(``accel.print``, ``accel.on_main_process(logger.info, ...)``, a disabled bar's
``set_postfix``, the writer's stand-in) still has its arguments evaluated on every
process, so the collective in them is reached by all. A printed sum over the
batch divided by the batch's own row count (``float(l) / labels.shape[0]``, d2l's
``train_ch13``) is reported and left alone: reducing the sum alone would divide
the global sum by this process's count.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..analysis import attr_chain
from ..divergence import Divergence
from ..file_tests import collective_note, racy_file_test
from ..handed_losses import handed_loss_reads, step_reads
from ..log_channels import TQDM_WRITE, progress_log
from ..logged_losses import LossPlaces, copies, stripped, with_innermost
from ..patterns import counts_samples
from ..printed_batch_values import BatchValues
from ..project_facts import HelperFact
from ..reduction import loss_reduction
from ..reduction.placement import code
from ..rule import Rule, keyword_arg
from ..stored_losses import stored_loss_reads

__all__ = ["TQDM_WRITE", "PrintMainProcess"]


class PrintMainProcess(BatchValues, LossPlaces, Rule):
    code = "AM008"
    name = "print-main-process"
    summary = "print(...) -> accel.print(...); printed loss.item() -> global-batch loss"

    @cached_property
    def global_reads(self) -> frozenset[cst.Call]:
        """The loss reads that become ``accel.global_loss(loss)``: those in the loop
        of their backward that every rank reaches.

        A read made global is the same on every rank, so a branch on it
        (``if loss.item() < best: best = loss.item()``) is not rank-dependent, and
        neither is a value it sets. Start from every read in such a loop, assume
        they are all made global, and drop those that are still in a rank-dependent
        place, until none is. What remains is consistent: the migrated file, read
        again, has exactly these reads global and everything else as analysed,
        so a second run changes nothing.
        """
        made = self._loss_reads | frozenset(
            read for read, how in self.batch_reads.items() if how.kind != "unknown"
        )
        if not made:
            return made  # nothing to make global: no analysis to run
        # a read under a test of the file system is no place for a collective
        made = frozenset(c for c in made if racy_file_test(self.index, c) is None)
        while True:
            divergence = Divergence(self.index, made)
            uniform = frozenset(call for call in made if divergence.uniform(call))
            if uniform == made:
                return made
            made = uniform

    @cached_property
    def _loss_reads(self) -> frozenset[cst.Call]:
        """Reads of a backpropagated loss in the loop of its backward."""
        return frozenset(
            call
            for call in self.index.calls
            if (tensor := self._read_of(call)) is not None
            and self._placement(tensor, call) == "loop"
            and not self._scaled_by_count(call)
        )

    def _scaled_by_count(self, read: cst.Call) -> bool:
        """``loss.item() * x.size(0)``: the batch-mean loss times this process's
        sample count is a sum over its samples. The global-batch loss times a local
        count would be neither the local nor the global sum. (A division, by
        ``len(loader)`` or accumulation steps, keeps a mean a mean.)"""
        node: cst.CSTNode = read
        parent = self.index.parent(node)
        while isinstance(parent, cst.BinaryOperation) and isinstance(
            parent.operator, cst.Multiply
        ):
            other = parent.right if parent.left is node else parent.left
            if counts_samples(self.index, other):
                return True
            node, parent = parent, self.index.parent(parent)
        return False

    def _sum_over_loader(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in the value of ``x += ...`` in a loop over a data loader
        (a sum that AM009 combines across processes)?"""
        augmented = next(
            (a for a in self.index.ancestors(node) if isinstance(a, cst.AugAssign)),
            None,
        )
        if augmented is None or not isinstance(augmented.operator, cst.AddAssign):
            return False
        return any(
            isinstance(a, cst.For) and self.index.loader_loop(a.iter)[0]
            for a in self.index.ancestors(augmented)
        )

    def _why_apart(self, read: cst.Call) -> str:
        """``(rank-dependent branch)``, or the test of the file system that
        keeps the processes apart there (``file_tests``)."""
        return collective_note(self, read).strip() or "(rank-dependent branch)"

    def _global(
        self, original: cst.Call, tensor: cst.BaseExpression
    ) -> cst.BaseExpression | None:
        """``accel.global_loss(tensor)`` for a loss read, or None (reported why)."""
        handed = self._step_reads.get(original)
        if handed is not None:
            self.report(
                original,
                "fixed",
                f"logged loss {handed.where} backpropagates, read in a callback it "
                "runs after each step's backward on every process -> "
                "accel.global_loss(loss) (the global-batch loss)",
            )
            return self.runtime_call("global_loss", [cst.Arg(value=tensor)])
        place = self._placement(self._read_of(original), original)  # type: ignore[arg-type]
        if place == "inner":
            self.report(
                original,
                "needs-review",
                "loss read in a loop nested in the loop of its backward, over "
                "something the rule cannot tell has as many items on every process "
                "(a list grown or changed elsewhere): accel.global_loss there could "
                "leave processes waiting on each other; it shows this process's share "
                "of the batch",
                if_migrated=True,
            )
            return None
        if place == "after":
            self.report(
                original,
                "needs-review",
                "loss read outside the loop of its backward: it shows this process's share of the batch",
                if_migrated=True,
            )
            return None
        if place is None:
            if original in self.batch_reads:
                return self._batch_value(original, tensor)
            self._report_companion(original)
            return None
        if self._scaled_by_count(original):
            if not self._sum_over_loader(original):
                self.report(
                    original,
                    "needs-review",
                    "loss times this process's batch size: a sum over this process's samples only; combine it with accel.reduce",
                    if_migrated=True,
                )
            # `total += loss.item() * x.size(0)`: a sum, which AM009 reduces.
            return None
        if original not in self.global_reads:
            self.report(
                original,
                "needs-review",
                "loss read where only some processes may go "
                f"{self._why_apart(original)}; it shows this process's share only",
                if_migrated=True,
            )
            return None
        key = self.index.key(stripped(self._read_of(original)))  # type: ignore[arg-type]
        # AM007 reports this loss's backward with an unknown reduction: the
        # runtime weighs it as a mean over samples, and global_loss reuses that
        # weighting, so the combined value is as much a guess (said, not "fixed")
        concern = self.unweighed_losses.get(key, "") if key is not None else ""
        if isinstance(tensor, cst.BinaryOperation):
            tensor = tensor.with_changes(lpar=(), rpar=())  # `(loss / n).item()`
        args = [cst.Arg(value=tensor)]
        returned = self._returned(stripped(self._read_of(original)))  # type: ignore[arg-type]
        if returned is not None:
            # Combined as the step function's loss reduces its batch: a sum-reduced
            # loss is the sum of the processes' sums.
            how = loss_reduction(self.index, returned.value, returned.value)
            if how.kind == "unknown":
                concern = concern or f"its reduction is not known ({how.reason})"
            elif how.kind == "token-mean" and how.count is None:
                concern = concern or how.reason
            if how.kind == "sum":
                args.append(keyword_arg("reduction", self._sum_string(original)))
            self._report_global(
                original,
                f"logged loss returned by `{returned.function.name.value}`",
                concern,
            )
            return self.runtime_call("global_loss", args)
        weight = self._term_reduction(self._read_of(original), original)  # type: ignore[arg-type]
        if isinstance(weight, str):
            self.report(
                original,
                "needs-review",
                f"logged loss term: {weight}; it shows this process's share only",
                if_migrated=True,
            )
            return None
        self._report_global(original, "logged loss", concern)
        return self.runtime_call("global_loss", args + weight)

    def _global_read(
        self, original: cst.Call, tensor: cst.BaseExpression
    ) -> cst.BaseExpression | None:
        """``_global`` of the tensor a read reads: of the variable under a copy
        (``loss.data.cpu().numpy()`` -> ``accel.global_loss(loss).data.cpu()
        .numpy()``), as the runtime knows the backpropagated loss by its
        identity and storage, not a copy's; of ``tensor`` itself otherwise."""
        if copies(tensor):
            return with_innermost(tensor, lambda inner: self._global(original, inner))
        return self._global(original, tensor)

    def _report_global(self, read: cst.Call, what: str, concern: str) -> None:
        """The finding of a loss read made ``accel.global_loss(...)``: fixed, or
        needs-review where the loss's reduction is not known (as AM007 says at
        its backward)."""
        if not concern:
            self.report(
                read,
                "fixed",
                f"{what} -> accel.global_loss(loss) (the global-batch loss)",
            )
            return
        self.report(
            read,
            "needs-review",
            f"{what} -> accel.global_loss(loss), but {concern}; accel.global_loss "
            "weighs the processes' shares as a mean over samples, as accel.backward "
            "does (AM007), so the value printed may not be the original's",
            if_migrated=True,
        )

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if self._read_of(original_node) is not None:
            func = updated_node.func
            if isinstance(original_node.func, cst.Attribute):  # x.item()
                assert isinstance(func, cst.Attribute)
                receiver = self._global_read(original_node, func.value)
                if receiver is not None:
                    return updated_node.with_changes(
                        func=func.with_changes(value=receiver)
                    )
            else:
                receiver = self._global_read(original_node, updated_node.args[0].value)
                if receiver is not None:
                    return updated_node.with_changes(
                        args=[updated_node.args[0].with_changes(value=receiver)]
                    )
            return updated_node
        if "builtins.print" in self.qualnames(original_node.func) and self._main_only(
            original_node
        ):
            self.report(
                original_node, "fixed", "print -> accel.print (main process only)"
            )
            return updated_node.with_changes(func=self.runtime_attr("print"))
        if self._progress_log(original_node):
            # `logger.info(...)`: a progress line, shown once as the original
            # showed it. Warnings and errors stay on every process, like prints to
            # stderr: whichever process has one should show it.
            shown = code(original_node.func)
            self.report(
                original_node,
                "fixed",
                f"{shown} -> accel.on_main_process({shown}, ...) (main process only)",
            )
            return self.on_main_process(updated_node)
        if not self.qualnames(original_node.func).isdisjoint(
            TQDM_WRITE
        ) and self._main_only(original_node):
            # tqdm.write clears and redraws the (main process's) bars: keep it,
            # on the main process only.
            self.report(
                original_node,
                "fixed",
                "tqdm.write -> accel.on_main_process(tqdm.write, ...) (main process only)",
            )
            return self.on_main_process(updated_node)
        return updated_node

    @cached_property
    def _step_reads(self) -> dict[cst.Call, HelperFact]:
        """Loss reads in a step callback of a batch trainer class (``handed_losses``)."""
        return step_reads(self.index)

    def visit_Module(self, node: cst.Module) -> None:
        """Losses stored on the instance and read back in another method
        (``stored_losses``): this process's share, at a place the rule cannot
        make global."""
        for read, why in stored_loss_reads(self.index, self._line_of):
            self.report(read, "needs-review", why, if_migrated=True)
        for read, why in handed_loss_reads(self.index):
            self.report(read, "needs-review", why, if_migrated=True)

    def _line_of(self, node: cst.CSTNode) -> int:
        return self.original_line(node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        """``if loss < best:`` on a returned loss tensor: a decision on this
        process's share, which no read here makes global (``loss.item()`` is)."""
        for side in (node.left, *(c.comparator for c in node.comparisons)):
            returned = self._returned(stripped(side))
            if returned is not None:
                self.report(
                    node,
                    "needs-review",
                    f"compares the loss `{returned.function.name.value}` returns, "
                    "this process's share of the batch: processes can decide "
                    "differently (stop at different steps and hang); compare "
                    "accel.global_loss(loss).item() instead",
                    if_migrated=True,
                )
                return

    def _progress_log(self, node: cst.Call) -> bool:
        """``logging.info(...)``, ``logger.debug(...)``: a log call of a progress
        level, made as a statement (its value unused), outside ``except``."""
        return (
            progress_log(self.index, node)
            and isinstance(self.index.parent(node), cst.Expr)
            and self._main_only(node)
        )

    def _main_only(self, node: cst.Call) -> bool:
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "file":
                if attr_chain(arg.value) in {"sys.stderr", "stderr"}:
                    return False
        return not self.index.in_except(node)
