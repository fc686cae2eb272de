"""AM009 metric-sums: sums accumulated over a sharded loader are combined across processes.

## What
In a loop over a data loader (or a loop over ``range(n)`` that takes each
turn's batch with ``next(it)`` of a loader's iterator: crnn.pytorch's
``val_iter = iter(data_loader)``; ``for i in range(max_iter): data =
next(val_iter)``), a variable set to zero before the loop and
increased inside it (``correct += pred.eq(target).sum().item()``,
``total += target.size(0)``, ``test_loss += F.nll_loss(out, y, reduction="sum").item()``)
is a sum over this process's share of the data. The rule makes it a sum over all
of it:

- a sum read only after the loop gets ``x = accel.reduce(x)`` right after the loop;
- a sum also read inside the loop (a progress line) is combined at every step:
  ``x += accel.reduce(...)``, so running values match the original's too;
- a batch-mean loss (``test_loss += criterion(out, y).item()``, averaged later over
  ``len(loader)``) becomes ``test_loss += accel.global_loss(criterion(out, y)).item()``.
  Divided by a step count (``/ len(loader)``) it is still a batch mean; multiplied
  by the batch size (``loss.item() * x.size(0)``) it is a sum, where the loss is
  a mean over the batch's samples: of a loss whose reduction AM007 reports (a
  mean of masked rows, a mean over tokens), it is reported with that reason. A sum over the
  batch's rows divided by this process's count of them (``acc +=
  correct.item() / y.size(0)``, a per-batch accuracy averaged later over
  ``len(loader)``) is this process's batch mean; the original's is
  ``accel.reduce(correct.item()) / accel.reduce(y.size(0))``, written so. A sum
  over the rows (of all a tensor's elements) times constants over their count
  (``correct.mul(100.0 / n)``; the ImageNet example's ``acc1, acc5 =
  accuracy(output, target, topk=(1, 5))``, whose items are
  ``correct_k.mul_(100.0 / batch_size)`` with ``batch_size = target.size(0)``)
  is a percentage of this process's rows: weighted by their count,
  ``accel.global_loss(acc1[0], count=target.size(0))``, it is the whole batch's.
  Summed along one dimension only, or with the counted variable assigned between
  the call and the use, it is reported. A loss function reached through a
  parameter (``criterion`` passed in by the caller as ``nn.CrossEntropyLoss()``
  or ``F.cross_entropy``) counts as what the callers pass, in batch mode those
  of the batch's other files too (``criterion = nn.CrossEntropyLoss()`` in
  main.py handed to engine.py's ``validate``). A metric helper of a local module
  counts as what it returns over what it is handed (project facts): ``correct +=
  count_correct(output, target)`` with metrics.py's ``count_correct`` returning
  ``pred.eq(target).sum().item()`` is a sum, one returning
  ``(output.argmax(1) == target).float().mean().item()`` a batch mean that is a
  number (weighted as below), and metrics.py's ImageNet ``accuracy`` is weighted
  as above; a helper that reads anything else (a global, another function) is
  reported;
- per-batch values collected in objects made before the loop, with
  ``meter.update(loss.item(), x.size(0))``, ``values.append(...)`` (or
  ``values += [...]``, one element) or ``values[k] = ...``, are made the original's per-batch values: a batch mean
  becomes ``accel.global_loss(...)`` (a number from one of the script's functions,
  ``accel.global_loss(torch.as_tensor(...)).item()``), a sum or a count
  ``accel.reduce(...)``. What the object then holds, and everything computed from
  it after the loop (``sum(values)``, ``meter.avg``), is the original's. Values
  handed to a method of the file's own class that keeps them in the object under
  another name (RAFT's ``logger.push(metrics)`` adding into
  ``self.running_loss``) are reported: what the object does with them is not
  followed. So is an object made before the loop and handed to a function of
  the file that adds into it (usuyama/pytorch-unet's ``calc_loss(pred,
  target, metrics)`` with ``metrics['bce'] += bce * target.size(0)``;
  ``metrics/handed_accumulators.py``), and the other term of a ratio with it
  (``metrics['loss'] / epoch_samples``) is left alone too, with every term
  of a ratio with that one in turn;
- a batch mean that is a Python number is never given to ``accel.global_loss``
  (which takes a tensor). Linear in the batch's losses (``acc =
  (pred == y).float().mean().item()``; ``total += acc``), it is weighted by each
  process's share of the batch: ``accel.global_loss(torch.as_tensor(acc)).item()``,
  right also for unequal shares. A non-linear function of them (PSNR: ``psnr = 10 *
  log10(1 / mse.item())``; ``avg_psnr += psnr``) cannot be combined from the
  processes' values, so the losses it is computed from are made the whole batch's
  (``mse.item()`` -> ``accel.global_loss(mse).item()``): every process then computes
  the original's value, and the sum needs no combining. A number computed by a
  function of this file (``avg += psnr_of(mse.item())``) is reported.
- loss tensors that a function of this file backpropagates and returns, collected
  as they are (``losses.append(self._run_batch(x, y))``), are reported: what the
  collection is used for is not followed (see AM008 for reads of them).
- ``x += ...`` where the loop sets ``x`` anew before it in every iteration
  (``loss = criterion(out, y)`` then ``loss += loss.item()``, the torchtext
  tutorial's test loss) is no running sum, whatever was set before the loop:
  it is never combined as one. Read after the loop, it is this process's last
  batch's value, reported as needs-review; a running sum of it in another
  variable (``total += loss.item()``) is combined as usual;
- a duration read off the clock (``batch_time.update(time.time() - end)``, the
  ImageNet example's meters) is no share of a batch: each process's own is as
  right as the original's, and it is left alone. A loss rebound to itself in
  another dtype (``loss = loss.float()`` before ``losses.update(loss.item(),
  n)``) keeps the kind of its other assignments;
- a value collected in an outer loop from the sums of a loader loop nested in
  it (``queue.append(right / (right + error))`` after an N-way test run every
  few training steps) is left as it is: those sums are combined right after
  their own loop (or that loop is reported), so the value is already the whole
  data's (or named there);
- a loop that ranks its batch's samples against each other (a candidate list's
  ``torch.topk`` for HR@k; an N-way trial's ``np.argmax(output)`` over the
  whole batch, with batches of more than one sample) is reported and left
  alone (``metrics/batch_ranking.py``);
- the two terms of one ratio (``train_loss += loss.item() * batch_size`` and
  ``count += batch_size`` in one loop, then ``train_loss / count`` in it or
  after it) are combined together or neither: where the rule leaves one
  uncombined (the loss's reduction is unknown), the other is left alone too and
  reported, so the ratio stays this process's own rather than its share's sum
  over the whole data's count, a number the original never printed
  (``metrics/ratios.py``); an uncombined term may also be collected
  (``running.append(v * n)`` then ``sum(running) / count``) or kept by a
  meter (``meter.update(v, n)`` then ``meter.sum / total``);
- a value it cannot classify is reported, unless a later rule names the cause:
  outputs collected per batch (AM029 gathers them) and a write into a tensor kept
  across steps (``queue[:, ptr:ptr + n] = feats.T``, AM032). With that rule not
  selected, this one reports it as before;
- sums and collections in a loop that is not over a loader but takes its
  batches with ``next(it)`` from one (Reptile's ``do_evaluation``: ``for _ in
  range(iterations): data, labels = next(test_iter)`` over an endless generator
  around a DataLoader, ``losses.append(loss.item())``) and runs no backward are
  reported, not rewritten (``metrics/next_batches.py``).

## Why
Evaluation loaders are sharded like training loaders, so no sample is counted
twice and none is missed; the numbers each process accumulates are its share.
Combining them makes what the main process prints equal to the single-process
value (``test_loss / len(test_loader.dataset)`` included).

## Example
```python
# before
correct = 0
for data, target in test_loader:
    pred = model(data).argmax(dim=1)
    correct += pred.eq(target).sum().item()
print(correct / len(test_loader.dataset))
# after
correct = 0
for data, target in test_loader:
    pred = model(data).argmax(dim=1)
    correct += pred.eq(target).sum().item()
correct = accel.reduce(correct)
accel.print(correct / len(test_loader.dataset))
```

## Fix safety
``accel.reduce`` is a collective, placed only where every process goes (see
AM008). An increment whose kind the rule cannot tell (a sum or a batch mean:
``total += my_metric(out, y)``) is left alone and reported as needs-review, and
so are collected values of another kind (per-sample predictions appended to a
list: each process holds its share), and so are values collected in a loop over
this process's samples or under a test of them (``for label, p in zip(labels,
preds): correct_pred[classes[label]] += 1``: a collective there would run a
different number of times on each process) and counts into cells the samples
choose (``class_total[label] += 1``). A loop that ranks the samples of its batch
against each other (NCF's hit rate: ``_, indices = torch.topk(predictions, k)``
then ``torch.take(item, indices)``, each test batch one user's candidate list)
is left alone and reported: each process would rank only its share, and no
combination of the processes' values gives the original's
(``metrics/batch_ranking.py``). A loader in a fixed order that such a loop
steps through is left whole by AM006 (``unsplit_loaders.py``): every process
then ranks whole batches, as the original did, and there is nothing to
combine; one that may shuffle stays sharded and both rules report it. Combining per batch is one collective per
batch and per value (two for a value weighted by a count). Where a number is
divided by the count (``100.0 / batch_size``), a process given no rows of a short
last batch (fewer rows than processes) raises ZeroDivisionError there, loudly,
never a wrong value; the finding says so.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..file_tests import collective_note
from ..metric_collections import _ROW_SCALED, CollectionPlans
from ..metric_means import MeanPlans
from ..metric_rewrites import MetricRewrites
from ..metrics.accumulators import (
    collected_values,
    read_after,
    read_inside,
    rebound_increments,
    reduced_after,
    scattered_counts,
    sum_increments,
)
from ..metrics.batch_ranking import batch_ranking, ranking_reason
from ..metrics.forms import BatchForms
from ..metrics.handed_accumulators import handed_accumulators
from ..metrics.kinds import BatchKinds
from ..metrics.next_batches import report_next_batches
from ..metrics.ratios import ratio_partner
from ..metrics.row_scaled import RowScaled, row_scaled
from ..metrics.scaled_losses import scaled_loss
from ..metrics.state_methods import kept_values
from ..patterns import torch_alias
from ..reduction.placement import code as _code
from ..rule import Rule
from ..subtrees import findall


class MetricSums(CollectionPlans, MeanPlans, MetricRewrites, Rule):
    code = "AM009"
    name = "metric-sums"
    summary = "sums over a sharded loader -> accel.reduce(...) after the loop"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: For loop (original node) -> accumulator names to reduce after it.
        self._after: dict[cst.For, list[str]] = {}
        #: AugAssign (original node) -> "reduce" or "global_loss" for its increment.
        self._wrap: dict[cst.AugAssign, str] = {}
        #: AugAssign (original node) -> the token count its global_loss is given.
        self._counts: dict[cst.AugAssign, cst.BaseExpression] = {}
        #: Collected values (original nodes) -> "reduce", "global_loss" or
        #: "global_number" (a number from a function of this file).
        self._collect: dict[cst.BaseExpression, str] = {}
        #: Reads of batch-mean losses (``mse.item()``, ``mse``) that a non-linear
        #: metric is computed from: made the whole batch's (``accel.global_loss``).
        self._reads: set[cst.BaseExpression] = set()
        #: Values (original nodes) that are sums over this process's rows scaled
        #: by their count: weighted by it (``accel.global_loss(v, count=rows)``).
        self._scaled: dict[cst.BaseExpression, RowScaled] = {}

    @cached_property
    def _kinds(self) -> BatchKinds:
        return BatchKinds(self.index)

    @cached_property
    def _forms(self) -> BatchForms:
        return BatchForms(self._kinds)

    # -- planning, on the original tree -----------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        # a loop over a loader, or one that draws each turn's batch with
        # `next(it)` of a loader's iterator (crnn's `for i in range(max_iter):
        # data = next(val_iter)`); other loops that take a loader's batches
        # with next(...) are reported (metrics/next_batches.py)
        if not (self.index.loader_loop(node.iter)[0] or self._next_loop(node)):
            report_next_batches(self, node)
            return
        increments = list(sum_increments(self.index, node))
        collections = list(collected_values(self.index, node))
        ranking = batch_ranking(self.index, node)
        if ranking is not None and (increments or collections):
            # a candidate list ranked over the batch (NCF's HR@k): no per-process
            # value of it combines into the original's
            self.report(
                ranking, "needs-review", ranking_reason(ranking), if_migrated=True
            )
            return
        for call, what in scattered_counts(self.index, node):
            self.report(
                call,
                "needs-review",
                f"counts collected with `{what}` into cells chosen by this "
                "process's samples (a confusion matrix, a histogram) hold this "
                "process's share; not combined across processes: reduce the array "
                "after the loop (accel.reduce(torch.as_tensor(...)))",
                if_migrated=True,
            )
        for aug, value in rebound_increments(self.index, node):
            name = attr_chain(aug.target)
            assert name is not None
            if read_after(self.index, node, name):
                self.report(
                    aug,
                    "needs-review",
                    f"`{name}` is set to `{_code(value)}` before this increment in "
                    "every iteration, so it sums no batches: after the loop it holds "
                    "the last batch's value of this process's share, not the whole "
                    "batch's (not combined across processes); if a running sum was "
                    "meant, add into another variable",
                    if_migrated=True,
                )
        # collected terms left this process's share: the other term of a
        # ratio with one of them is left alone too
        kept: set[str] = set()
        for call, written in kept_values(self.index, node):
            kept.add(attr_chain(call.func.value) or "")  # type: ignore[attr-defined]
            self.report(
                call,
                "needs-review",
                f"`{written}` hands this process's share of each batch to a method "
                "that keeps it in the object (running sums, averages logged later): "
                "not combined across processes; combine the values before handing "
                "them (accel.global_loss for batch means, accel.reduce for sums)",
                if_migrated=True,
            )
        for call, name, function in handed_accumulators(self.index, node):
            kept.add(name)
            self.report(
                call,
                "needs-review",
                f"`{name}` is handed to `{function}`, which adds this process's "
                "share of each batch into it: what it holds after the loop is this "
                "process's share, not combined across processes; combine the values "
                "added (accel.reduce for sums, accel.global_loss for batch means) or "
                "reduce what it holds after the loop",
                if_migrated=True,
            )
        if not increments and not collections:
            return
        if not self.index.uniform(node):
            note = collective_note(self, node)
            branch = (
                f"a branch that not every process takes together{note}"
                if note
                else "a rank-dependent branch"
            )
            for aug in increments:
                self.report(
                    aug,
                    "needs-review",
                    f"sum over a sharded loader in {branch}: not combined across processes",
                    if_migrated=True,
                )
            for statement, _, what in collections:
                self.report(
                    statement,
                    "needs-review",
                    f"values collected with `{what}` in {branch} hold this process's share; not combined across processes",
                    if_migrated=True,
                )
            return
        for statement, values, what in collections:
            before = len(self.context.findings)
            self._plan_collection(statement, values, what, node)
            if not any(v in self._collect for v in values) and any(
                f.status == "needs-review" for f in self.context.findings[before:]
            ):
                kept.add(_collected_name(statement))
        reduce_after: list[str] = []
        declined = self._declined(increments, node) | (kept - {""})
        # terms left alone for a ratio with a declined one, in turn
        uncombined = declined | self._ratio_closure(increments, node, declined)
        for aug in increments:
            name = attr_chain(aug.target)
            assert name is not None
            kind = self._kinds.kind(aug.value, node)
            scaled = row_scaled(self._kinds, aug.value, node)
            ratio = (
                None
                if name in declined
                else ratio_partner(self.index, node, name, uncombined)
            )
            if ratio is not None:
                # the other term of a ratio whose declined term stays this
                # process's: combined alone it would print the share's sum
                # over the whole data's count
                partner, division = ratio
                self.report(
                    aug,
                    "needs-review",
                    f"`{name}` is a term of `{_code(division)}`, whose `{partner}` "
                    "is not combined across processes (see its finding): left "
                    "alone too, so the ratio is this process's own rather than its "
                    f"share's `{partner}` over the whole data's `{name}`; combine "
                    "both terms or neither",
                    if_migrated=True,
                )
            elif kind == "unknown" and scaled is not None:
                self._wrap[aug] = "row_scaled"
                self._scaled[aug.value] = scaled
                self._report_scaled(
                    aug,
                    f"`{name}` adds {_ROW_SCALED} -> accel.global_loss(..., "
                    "count=rows) per batch, the whole batch's",
                    [scaled],
                )
            elif kind == "unknown":
                others = {attr_chain(a.target) or "" for a in increments} - declined
                ratio = ratio_partner(self.index, node, name, others)
                self.report(
                    aug,
                    "needs-review",
                    self._unknown_reason(name, aug.value)
                    + (
                        f" (`{ratio[0]}`, the other term of `{_code(ratio[1])}`, "
                        "is left alone too)"
                        if ratio
                        else ""
                    ),
                    if_migrated=True,
                )
            elif kind == "mean":
                self._plan_mean(aug, name, node)
            elif read_inside(self.index, node, name, aug):
                self._wrap[aug] = "reduce"
                self.report(
                    aug,
                    "fixed",
                    f"`{name}` is read inside the loop -> summed across processes at every step",
                )
            elif name not in reduce_after and not reduced_after(self.index, node, name):
                reduce_after.append(name)
                self.report(
                    aug, "fixed", f"`{name}` -> accel.reduce({name}) after the loop"
                )
        if reduce_after:
            self._after[node] = reduce_after

    def _declined(self, increments: list[cst.AugAssign], loop: cst.For) -> set[str]:
        """The names of the increments that planning leaves uncombined (a value
        of unknown kind, a batch-mean number it cannot combine): the other term
        of a ratio with one of them is then left alone too."""
        names: set[str] = set()
        for aug in increments:
            name = attr_chain(aug.target)
            assert name is not None
            kind = self._kinds.kind(aug.value, loop)
            if kind == "unknown" and row_scaled(self._kinds, aug.value, loop) is None:
                names.add(name)
            elif kind == "mean" and self._mean_declined(aug, loop):
                names.add(name)
        return names

    def _ratio_closure(
        self, increments: list[cst.AugAssign], loop: cst.For, declined: set[str]
    ) -> set[str]:
        """The increments left alone as the other term of a ratio with a declined
        one, and those of a ratio with them in turn (``iou_sum / epoch_samples``
        where ``epoch_samples`` is left alone for ``metrics[k] / epoch_samples``):
        each ratio's terms are combined together or neither."""
        names = {attr_chain(a.target) or "" for a in increments} - {""}
        left = set(declined)
        grown = True
        while grown:
            grown = False
            for name in sorted(names - left):
                if ratio_partner(self.index, loop, name, left) is not None:
                    left.add(name)
                    grown = True
        return left - declined

    def _next_loop(self, node: cst.For) -> bool:
        """``for i in range(n): x, y = next(it)`` over ``it = iter(loader)``: a
        loop over no data of its own that reads a loader's batch each turn."""
        return self.index._no_data(node.iter, 0) and self.index.reads_loader(node)

    # -- numbers computed from batch means ------------------------------------------------
    def _unknown_reason(self, name: str, value: cst.BaseExpression) -> str:
        numpy = sorted(
            q
            for call in findall(value, m.Call())
            for q in self.index.qualnames(call.func)  # type: ignore[attr-defined]
            if q.startswith("numpy.")
        )
        if numpy:
            # `np.bincount(y.numpy())`: an array, which accel.reduce does not take
            return (
                f"`{name}` adds a NumPy value (`{numpy[0]}`), which the rule does "
                "not combine across processes (accel.reduce takes tensors and "
                "numbers); it holds this process's share only"
            )
        why = scaled_loss(self.index, value)
        if why:
            # `total += loss.item() * x.size(0)` of a loss AM007 reports
            return (
                f"`{name}` adds `{_code(value)}`, a loss times this process's "
                "batch size, which is the share's sum only where the loss is a "
                f"mean over the batch's samples; but {why}: it is not combined "
                "across processes and holds this process's share only"
            )
        return (
            f"cannot tell whether `{name}` sums or averages over batches; it holds "
            "this process's share only"
        )

    def _report_scaled(
        self, node: cst.CSTNode, fixed: str, scaled: list[RowScaled]
    ) -> None:
        """A fixed finding; needs-review where a number is divided by the count
        (``100.0 / batch_size``): a process given no rows of a short last batch
        (fewer rows than processes) raises ZeroDivisionError there."""
        divisions = sorted({s.division for s in scaled if s.division})
        if not divisions:
            self.report(node, "fixed", fixed)
            return
        self.report(
            node,
            "needs-review",
            f"{fixed}; but `{divisions[0]}` divides a number by the count of this "
            "process's rows, which is 0 where it gets no rows of a short last batch "
            "(fewer rows than processes): ZeroDivisionError there; divide the tensor "
            "instead (`t * 100.0 / n`, not `t.mul_(100.0 / n)`), which is then weighted by zero",
            if_migrated=True,
        )

    @cached_property
    def _torch_name(self) -> str | None:
        return torch_alias(self.index.module)


def _collected_name(statement: cst.CSTNode) -> str:
    """The collection a statement of ``collected_values`` fills: ``xs`` of
    ``xs.append(v)``, ``d`` of ``d[k] = v`` or ``xs[i] += v``."""
    target: cst.BaseExpression | None = None
    if isinstance(statement, cst.Call) and isinstance(statement.func, cst.Attribute):
        target = statement.func.value
    elif isinstance(statement, cst.AugAssign):
        target = statement.target
    elif isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target = statement.targets[0].target
    if isinstance(target, cst.Subscript):
        target = target.value
    return (attr_chain(target) or "") if target is not None else ""
