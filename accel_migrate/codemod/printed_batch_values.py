"""Printed values of this process's share of the batch other than the loss, in
AM008 (``print_main_process``): which reads are such values (``acc.item()``,
``ntokens.item()`` printed in the loop of a backward or of an evaluation over a
loader), how each is made the whole batch's (``accel.reduce`` for a sum,
``accel.global_loss`` for a mean), and the reports where it is not (a value
returned with the loss by a step function, of a kind the rule cannot tell).

A mixin of the rule: it reads the rule's ``index``, its loss places
(``LossPlaces``: ``_read_of``, ``_placement``, the loops), ``global_reads``,
``_main_only`` and ``_why_apart``, and reports and rewrites through the rule.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from .batch_rows import divided_by_rows
from .log_channels import logged_in
from .logged_losses import stripped
from .reduction import LossReduction
from .reduction.batch_values import batch_value_reduction
from .reduction.placement import code
from .rule import keyword_arg
from .unsplit_steps import same_on_every_process


class BatchValues:
    """AM008's printed values of this process's share of the batch."""

    @cached_property
    def batch_reads(self) -> dict[cst.Call, LossReduction]:
        """Printed reads of other tensors of this process's share of the batch
        (``acc.item()``, ``ntokens.item()``) in the loop of a backward or of an
        evaluation over a loader, and how each reduces the batch
        (``batch_values``)."""
        divergence = self.index.divergence  # shared; a loss read's taint aside
        loops = {
            loop
            for each in (*self.loss_loops.values(), *self.expression_loops.values())
            for loop in each
        }
        found: dict[cst.Call, LossReduction] = {}
        for read in divergence.local_reads:
            tensor = self._read_of(read)
            if (
                tensor is None
                or read in self._loss_reads
                or self._placement(tensor, read) is not None
                or self._companion(read) is not None
                or not self._printed(read)
                or same_on_every_process(self.index, read)
                or not (
                    self._loop(read) in loops
                    or self._fixed_inner_loop(read, loops)
                    or self._fixed_inner_loop(read, {self._loader_loop(read)} - {None})
                )
            ):
                continue
            found[read] = batch_value_reduction(self.index, stripped(tensor), read)
        return found

    def _printed(self, read: cst.Call) -> bool:
        """Is ``read`` in the arguments of a log call (``print``, ``logger.info``,
        ``pbar.set_postfix``, ``writer.add_scalar``, ``wandb.log``, a helper that
        prints: ``log_channels``), other than a print this rule leaves on every
        process (to ``sys.stderr``, in an ``except`` block)?"""
        found = logged_in(self.index, read)
        return found is not None and self._main_only(found[0])

    def _shows(self, read: cst.Call, past: bool = False) -> str:
        """``prints `acc``` or ``logs `acc` in `pbar.set_postfix``` (``printed``,
        ``logged`` when ``past``)."""
        shown = code(stripped(self._read_of(read)))  # type: ignore[arg-type]
        found = logged_in(self.index, read)
        if found is None or found[1] == "print":
            return f"{'printed' if past else 'prints'} `{shown}`"
        return f"{'logged' if past else 'logs'} `{shown}` in `{found[1]}`"

    def _batch_value(
        self, original: cst.Call, tensor: cst.BaseExpression
    ) -> cst.BaseExpression | None:
        """The global-batch value of a printed batch value (``batch_reads``), or
        None (reported why)."""
        how = self.batch_reads[original]
        shows = self._shows(original)
        if how.kind == "unknown":
            self.report(
                original,
                "needs-review",
                f"{shows}, a value of this process's share of the batch "
                f"(the original {'printed' if shows.startswith('prints') else 'logged'}"
                f" the whole batch's): {how.reason}; combine it across processes "
                + (
                    f'(accel.reduce(..., op="{how.op}"))'
                    if how.op
                    else "(accel.global_loss for a mean over samples, accel.reduce "
                    "for a sum)"
                ),
                if_migrated=True,
            )
            return None
        if original not in self.global_reads:
            self.report(
                original,
                "needs-review",
                f"{shows}, a value of this process's share of the batch, "
                "where only some processes may go "
                f"{self._why_apart(original)}: it shows this process's share only",
                if_migrated=True,
            )
            return None
        if isinstance(tensor, cst.BinaryOperation):
            tensor = tensor.with_changes(lpar=(), rpar=())
        if how.kind == "sum" and divided_by_rows(self.index, original):
            self.report(
                original,
                "needs-review",
                f"{shows}, a sum over this process's share of the batch, divided by "
                "this process's count of its rows: a mean over the share only; "
                "combine the sum and the count across processes (accel.reduce of "
                "each) before dividing",
                if_migrated=True,
            )
            return None
        if how.kind == "sum":
            self.report(
                original,
                "fixed",
                f"{self._shows(original, past=True)}, a sum over this process's share of the batch "
                "-> accel.reduce (the global batch's)",
            )
            return self.runtime_call("reduce", [cst.Arg(value=tensor)])
        keywords = [keyword_arg("count", how.count)] if how.count is not None else []
        over = (
            f"the elements `{code(how.count)}` counts"
            if how.count is not None
            else "the samples"
        )
        self.report(
            original,
            "fixed",
            f"{self._shows(original, past=True)}, a mean over {over} of this process's share of the "
            "batch -> accel.global_loss (the global batch's)",
        )
        return self.runtime_call("global_loss", [cst.Arg(value=tensor), *keywords])

    def _companion(self, read: cst.Call) -> cst.Call | None:
        """The step call that returned the tensor ``read`` reads with a loss."""
        tensor = stripped(self._read_of(read))  # type: ignore[arg-type]
        key = self.index.key(tensor)
        return self.index.returned_losses.companions.get(key) if key else None

    def _report_companion(self, read: cst.Call) -> None:
        """``acc.item()`` of a value returned with a loss (``loss, acc = step()``):
        this process's share, of a kind the rule does not know."""
        tensor = stripped(self._read_of(read))  # type: ignore[arg-type]
        call = self._companion(read)
        if call is None:
            return
        returned = self.index.returned_losses.returned_by(call)
        assert returned is not None
        self.report(
            read,
            "needs-review",
            f"`{code(tensor)}` is returned with the loss by "
            f"`{returned.function.name.value}`: a value of this process's share of "
            "the batch, which the rule cannot tell a mean, a sum or neither; it "
            "shows this process's share only",
            if_migrated=True,
        )
