"""Collected values in AM009 (``metric_sums``): how values a loop over a sharded
loader collects per batch (``xs.append(v)``, ``d[k] = v``, ``xs[i] += v``) are
combined as the whole batch's (``accel.reduce`` for sums and counts,
``accel.global_loss`` for batch means, weighted by each process's count of rows
for sums scaled by it), or why they are not.

A mixin of the rule: it reads the rule's ``index``, ``_kinds``, ``_forms`` and
``_torch_name``, writes its plan (``_collect``, ``_scaled``, ``_reads``) and
reports through the rule's ``_report_scaled``.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from .clock_readings import reads_clock
from .metrics.accumulators import batch_dependent, has_runtime_call, nested_sums
from .metrics.forms import direct_reads
from .metrics.kinds import read_of, returned_tensor
from .metrics.row_scaled import row_scaled
from .reduction.placement import code as _code
from .subtrees import findall

_ROW_SCALED = "a sum over the batch's rows scaled by their count"


class CollectionPlans:
    """AM009's planning of values collected per batch."""

    def _plan_collection(
        self,
        statement: cst.CSTNode,
        values: list[cst.BaseExpression],
        what: str,
        loop: cst.For,
    ) -> None:
        # imported here: the rules package imports this module (metric_sums)
        from .rules.batch_state_writes import defer_to_batch_state_writes
        from .rules.collected_outputs import defer_to_collected_outputs

        plan: dict[cst.BaseExpression, str] = {}
        if self.index.divergence.runs_divergently(statement):
            # `correct_pred[classes[label]] += 1` in `for label, p in zip(labels,
            # preds)`: this process's samples decide how often it runs (and a
            # collective per run would hang).
            if defer_to_collected_outputs(self, statement):
                return  # outputs (`confident.append(out)` under a test): AM029's
            self.report(
                statement,
                "needs-review",
                f"values collected with `{what}` in a loop over this process's "
                "samples (or under a test of them) hold this process's share; not "
                "combined across processes",
                if_migrated=True,
            )
            return
        if (
            isinstance(statement, cst.AugAssign)
            and statement in self.index.divergence.local_increments
            and not any(batch_dependent(v) for v in values)
        ):
            # `class_total[label] += 1`: a count into a cell this process's
            # samples choose.
            self.report(
                statement,
                "needs-review",
                f"counts collected with `{what}` into cells chosen by this "
                "process's samples hold this process's share; not combined across "
                "processes",
                if_migrated=True,
            )
            return
        combined = nested_sums(self.index, loop, statement)
        for value in values:
            if has_runtime_call(self.index, value) or not batch_dependent(value):
                continue
            used = {n.value for n in findall(value, m.Name())}
            if used and used <= combined:
                continue  # sums of a nested loop, combined (or reported) after it
            if reads_clock(self.index, self.qualnames, value):
                # `batch_time.update(time.time() - end)`: no share of a batch
                continue
            returned = returned_tensor(self.index, value)
            if returned is not None:
                self.report(
                    statement,
                    "needs-review",
                    f"values collected with `{what}` are the loss tensors "
                    f"`{returned}` returns, this process's share of each batch; the "
                    "rule does not follow what the collection is used for: collect "
                    "accel.global_loss(loss).item() for the whole batch's",
                    if_migrated=True,
                )
                return
            scaled = row_scaled(self._kinds, value, loop)
            if scaled is not None:
                plan[value] = "row_scaled"
                self._scaled[value] = scaled
                continue
            kind = self._kinds.kind(value, loop)
            if kind == "unknown":
                if defer_to_collected_outputs(self, statement):
                    return  # outputs collected per batch (predictions): AM029's
                if defer_to_batch_state_writes(self, statement):
                    return  # a tensor kept across steps (a queue): AM032's
                self.report(
                    statement,
                    "needs-review",
                    f"values collected with `{what}` hold this process's share "
                    "(the rule cannot tell whether they are sums or batch means)",
                    if_migrated=True,
                )
                return
            reads: list[cst.BaseExpression] = []
            form = self._forms.form(value, loop, reads) if kind == "mean" else "other"
            if form == "opaque":
                self.report(
                    statement,
                    "needs-review",
                    f"values collected with `{what}` are numbers that a function of "
                    f"this file computes from this process's share of each batch "
                    f"(`{_code(value)}`); the rule cannot tell whether it is linear in "
                    "the batch, and per-process values of a non-linear one (PSNR) "
                    "cannot be combined into the original's: compute them from "
                    "accel.global_loss(loss).item() in the loop",
                    if_migrated=True,
                )
                return
            if form == "nonlinear":
                # Computed from the whole batch's losses: the original's values.
                self._reads.update(reads)
                plan[value] = "as_is"
                continue
            if kind == "sum":
                plan[value] = "reduce"
            elif self._forms.returns_number(value) or (
                form == "linear"
                and not direct_reads(value)
                and all(read_of(r) is not r for r in reads)
            ):
                if self._torch_name is None:
                    self.report(
                        statement,
                        "needs-review",
                        f"values collected with `{what}` hold this process's share (batch means that are numbers; the file does not import torch)",
                        if_migrated=True,
                    )
                    return
                plan[value] = "global_number"
            elif not direct_reads(value) and self._forms.number_valued(value):
                # `valid_losses.append(loss_aver)` of `loss_aver = loss.item() /
                # args.batch_size`: a number, which accel.global_loss cannot take
                if self._torch_name is None:
                    # no `torch.as_tensor(...)` to write: reported, not wrapped
                    self.report(
                        statement,
                        "needs-review",
                        f"values collected with `{what}` are numbers read off this "
                        f"process's share of each batch (`{_code(value)}`), which "
                        "accel.global_loss (it takes a tensor) cannot combine, and "
                        "the file does not import torch to make one: compute them "
                        "from accel.global_loss(loss).item() in the loop",
                        if_migrated=True,
                    )
                    return
                plan[value] = "global_number"
            else:
                plan[value] = "global_loss"
        if not plan:
            return
        self._collect.update(plan)
        if set(plan.values()) == {"as_is"}:
            self.report(
                statement,
                "fixed",
                f"`{what}` collects numbers computed from batch-mean losses -> "
                "computed from the whole batch's losses (accel.global_loss), the same "
                "on every process",
            )
            return
        scaled = [self._scaled[v] for v, how in plan.items() if how == "row_scaled"]
        weighted = f"; {_ROW_SCALED}: weighted by each process's count of them"
        self._report_scaled(
            statement,
            f"`{what}` collects per-batch values -> the whole batch's "
            "(accel.global_loss for batch means, accel.reduce for sums and counts"
            f"{weighted if scaled else ''})",
            scaled,
        )
