"""Sums of batch means in AM009 (``metric_sums``): how ``total += value``, a
batch mean, is combined as the whole batch's (``accel.global_loss`` per batch, the
losses a non-linear number is computed from made the whole batch's, a quotient
of sums reduced on both sides), or why it is not.

A mixin of the rule: it reads the rule's ``index``, ``_kinds``, ``_forms`` and
``_torch_name``, and writes its plan (``_wrap``, ``_counts``, ``_reads``).
"""

from __future__ import annotations

import libcst as cst

from .metrics.forms import direct_reads
from .metrics.kinds import read_of, returned_tensor
from .reduction.logged import logged_weight
from .reduction.placement import code as _code


class MeanPlans:
    """AM009's planning of increments that add batch means."""

    def _plan_mean(self, aug: cst.AugAssign, name: str, loop: cst.For) -> None:
        """``name += value``, a batch mean: combined per batch as the whole batch's.

        ``accel.global_loss`` takes a tensor. A Python number (``loss.item()``,
        ``10 * log10(1 / mse.item())``) is combined according to how it depends on
        the batch: linearly (``acc = (...).mean().item()``): weighted by each
        process's share, as a tensor; through a non-linear function (PSNR): the
        losses it is computed from are made the whole batch's first, so every
        process computes the original's value; anything else: reported.
        """
        returned = returned_tensor(self.index, aug.value)
        if returned is not None:
            # `total += self._run_batch(x, y)`: the loss tensor itself, which
            # global_loss takes as it is (a tensor stays a tensor).
            self._wrap[aug] = "global_loss"
            self.report(
                aug,
                "fixed",
                f"`{name}` adds the batch-mean loss `{returned}` returns -> "
                "accel.global_loss(...) per batch",
            )
            return
        reads: list[cst.BaseExpression] = []
        form = self._forms.form(aug.value, loop, reads)
        value = f"`{_code(aug.value)}`"
        if self._kinds.quotient_mean(aug.value, loop):
            self._plan_quotient(aug, name)
            return
        if form == "nonlinear":
            self._reads.update(reads)
            self.report(
                aug,
                "fixed",
                f"`{name}` adds {value}, a non-linear function of batch-mean losses: "
                "it is computed from the whole batch's losses (accel.global_loss), the "
                "same on every process",
            )
        elif form == "opaque":
            self.report(
                aug,
                "needs-review",
                f"`{name}` adds {value}, a number that a function of this file "
                "computes from this process's share of the batch; the rule cannot "
                "tell whether it is linear in the batch, and per-process values of a "
                "non-linear one (PSNR) cannot be combined into the original's: compute "
                "it from accel.global_loss(loss).item() in the loop",
                if_migrated=True,
            )
        elif (
            form == "linear"
            and not direct_reads(aug.value)
            and all(read_of(r) is not r for r in reads)  # a number, not a tensor
        ):
            if self._torch_name is None:
                self.report(
                    aug,
                    "needs-review",
                    f"`{name}` adds {value}, a batch mean that is a number; it holds "
                    "this process's share (the file does not import torch)",
                    if_migrated=True,
                )
                return
            self._wrap[aug] = "global_number"
            self.report(
                aug,
                "fixed",
                f"`{name}` adds batch means -> accel.global_loss(...) per batch",
            )
        else:
            self._wrap[aug] = "global_loss"
            weight = logged_weight(self.index, aug.value, aug)
            if weight.problem:
                self.report(
                    aug,
                    "needs-review",
                    f"`{name}` adds batch-mean losses -> accel.global_loss(...) per "
                    f"batch, weighted as means over samples, but {weight.problem}",
                )
                return
            if weight.count is not None:
                self._counts[aug] = weight.count
            self.report(
                aug,
                "fixed",
                f"`{name}` adds batch-mean losses -> accel.global_loss(...) per batch"
                + (
                    ", weighted by each process's count of tokens"
                    if weight.count is not None
                    else ""
                ),
            )

    def _mean_declined(self, aug: cst.AugAssign, loop: cst.For) -> bool:
        """Does ``_plan_mean`` leave ``aug``, a batch mean, uncombined (a number
        that a function of this file computes; a number in a file that does
        not import torch)? Read before planning, so that the other term of a
        ratio with it is left alone too (``metrics/ratios.py``)."""
        if returned_tensor(self.index, aug.value) is not None:
            return False
        if self._kinds.quotient_mean(aug.value, loop):
            return False
        reads: list[cst.BaseExpression] = []
        form = self._forms.form(aug.value, loop, reads)
        if form == "opaque":
            return True
        return (
            form == "linear"
            and not direct_reads(aug.value)
            and all(read_of(r) is not r for r in reads)
            and self._torch_name is None
        )

    def _plan_quotient(self, aug: cst.AugAssign, name: str) -> None:
        """``acc += correct.sum().item() / x.size(0)``: a sum over this process's
        rows over their count, its share's mean. The original's is the global
        sum over the global count: both sides are reduced (which also never
        divides by the zero rows of an empty share)."""
        self._wrap[aug] = "quotient"
        self.report(
            aug,
            "fixed",
            f"`{name}` adds a sum over the batch's rows over their count (a batch "
            "mean) -> accel.reduce(...) / accel.reduce(...), the whole batch's",
        )
