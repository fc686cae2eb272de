"""AM029 collected-outputs: predictions collected over a sharded loader are gathered in the original order.

## What
In a loop over a data loader, a list made empty before the loop that collects
the model's outputs (predictions, probabilities, labels) is this process's share
of them. The rule gathers it right after the loop, in the original order:

- per sample, ``results += preds.tolist()`` or ``results.extend(preds.tolist())``:
  ``results = accel.gather_in_order(results, test_loader)``;
- per batch, ``all_preds.append(p.cpu())`` or ``all_preds += [p.cpu()]`` (later
  ``torch.cat(all_preds)``):
  ``all_preds = accel.gather_in_order(all_preds, test_loader, per_batch=True)``, one
  entry per original batch.

Every process then holds what the original collected: the same values, in the
same order, each sample once, so ``torch.cat``, a metric over them and a CSV
written from them (by the main process: AM017) are the original's.

## Why
Eval loaders are sharded like training loaders (AM006): each process sees its
share of every batch, so a submission file written from ``results`` held about
``1/N`` of the rows. ``accel.gather_in_order`` knows how the runtime split every
batch (contiguous slices of each global batch, no padding, in the default mode;
round-robin with repeated samples cut in per-device mode) and puts the pieces
back, also when the loader shuffles.

## Example
```python
# before
results = []
with torch.no_grad():
    for (xb,) in test_loader:
        results += model(xb).argmax(1).tolist()
write_submission(results)
# after
results = []
with torch.no_grad():
    for (xb,) in test_loader:
        results += model(xb).argmax(1).tolist()
    results = accel.gather_in_order(results, test_loader)
write_submission(results)
```

## Fix safety
Rewritten only when the shape is proven: the list is a variable bound to ``[]``
(or ``list()``) outside the loop, and bound to anything else
(``all_preds = np.array(all_preds)``) only before that ``[]`` or after the loop,
with the ``[]`` run again before each run of the loop; inside the loop it is used by that one
statement (and read by ``len(...)``), which runs once per batch (not in a nested loop or comprehension, not
under an ``if`` or ``try``; a ``with`` is fine), or appends once per row of the
batch in a loop over the rows of a batch tensor (the BERT SQuAD example's ``for
i, example_index in enumerate(example_indices): all_results.append(RawResult(...))``;
``range(len(X))``, ``range(X.size(0))`` too; ``X`` bound by the loader loop,
proven a tensor and never bound again: one value per sample), and the loop has no ``break``,
``continue`` or ``return``; the loader is a variable (or ``self.`` attribute) that
the loop does not rebind; and every process reaches the loop together
(``accel.gather_in_order`` is a collective, never placed in a per-sample loop nor
where only some processes go). Otherwise the collection is reported as
needs-review: it holds this process's share. The runtime checks that the values
match the shares (one per sample, or per batch one entry as long as the batch's
share) and fails on every process with ``GatherOrderError`` when they do not, so
a per-batch number taken for a prediction is an error, never a wrong order.
An integer item collected once per batch (``firsts += [out[0].cpu()]``,
``firsts.append(out[0])``) may be one output of several or the batch's first
row (one per batch, which no gather of shares gives back): it is reported as
needs-review, never gathered.
A tensor (or array) grown by joining itself with each batch's outputs,
``gt = torch.cat((gt, target), 0)`` or ``preds = np.concatenate([preds, p])``
(arnoweng/CheXNet's whole-set AUROC), is reported as needs-review: it ends
with this process's share of the rows, and is not gathered (collected in a
list and joined after the loop, it is).
Values that are numbers per batch (``losses.append(loss.item())``) are AM009's.
Each gather pickles the collection once to every process.

A tensor made with one entry per sample of a sharded loader's dataset
(``metrics = torch.zeros(3, len(train_dl.dataset))``) and written by position
as the batches come, in the function that makes it or in a local function it
is handed to (``metrics_g[LOSS, start_ndx:end_ndx] = loss_g.detach()`` at
``batch_ndx * batch_size``, dlwpt-code's LunaTrainingApp), is reported as
needs-review and never rewritten (``dataset_sized.py``): each process fills
the positions of its own samples only, and where they fall depends on how the
runtime split the batches, so no gather can put them back by position.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider

from ..analysis import attr_chain
from ..batch_indexed import batch_indexed_reason
from ..dataset_sized import dataset_sized_fills, dataset_sized_reason
from ..file_tests import collective_note
from ..metrics.batch_ranking import batch_ranking, ranking_reason
from ..output_collections import (
    Collection,
    collection_of,
    collections_in,
    concatenated_outputs,
    empty_list,
    rows_loop,
)
from ..rule import Rule
from ..subtrees import findall


def original_place(rule: Rule, node: cst.CSTNode) -> tuple[int, int]:
    return rule.original_start(node)


def defer_to_collected_outputs(rule: Rule, call: cst.CSTNode) -> bool:
    """For AM009: ``call`` (``xs.append(v)`` that AM009 cannot classify) collects
    outputs into a list: leave it to this rule, which runs later (unless it is
    not selected: then AM009 reports it as before)."""
    if not rule.context.runs("AM029") or collection_of(rule.index, call) is None:
        return False
    rule.context.deferred_collections.add(original_place(rule, call))
    return True


class CollectedOutputs(Rule):
    code = "AM029"
    name = "collected-outputs"
    summary = "outputs collected over a sharded loader -> accel.gather_in_order(...) after the loop"

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        #: Loop (original node) -> (list name, loader source, per batch) to gather after it.
        self._after: dict[cst.For, list[tuple[str, str, bool]]] = {}

    def visit_Module(self, node: cst.Module) -> None:
        for fill in dataset_sized_fills(self.index):
            line = self.original_start(fill.fill)[0]
            reason = dataset_sized_reason(fill, line)
            self.report(fill.maker, "needs-review", reason, if_migrated=True)

    def visit_For(self, node: cst.For) -> None:
        if not self.index.loader_loop(node.iter)[0]:
            return
        ranking = batch_ranking(self.index, node)
        for statement, name, join in concatenated_outputs(self.index, node):
            if self._loop_of(statement) is not node:
                continue  # an inner loader loop's
            self.report(
                statement,
                "needs-review",
                f"`{name}` joins the outputs of each batch of a sharded loader "
                f"(`{join}` of itself and the batch's): it ends with this "
                "process's share of the rows only, and a metric over it (an AUROC "
                "over the whole set) is this process's; not gathered: collect the "
                f"batches in a list (`{name}_list.append(...)`) and join them after "
                "the loop, which the codemod gathers in order",
                if_migrated=True,
            )
        for collection in collections_in(self.index, node):
            if self._loop_of(collection.statement) is not node:
                continue  # an inner loader loop's
            if ranking is not None:  # per batch: AM009 reports the loop
                if collection.granularity == "sample":
                    reason = f"`{collection.name}` is not gathered: "
                    self.report(
                        collection.statement,
                        "needs-review",
                        reason + ranking_reason(ranking),
                        if_migrated=True,
                    )
                continue
            if (
                collection.granularity == "batch"
                and not isinstance(collection.statement, cst.AugAssign)
                and (
                    original_place(self, collection.statement)
                    not in self.context.deferred_collections
                )
            ):
                continue  # per-batch numbers and losses: AM009's (`xs += [v]`,
                # which AM009 does not read, is this rule's)
            what = f"`{collection.name}`"
            read = batch_indexed_reason(
                self.index, _target_name(collection.statement), node
            )
            if read is not None:
                self.report(
                    collection.statement,
                    "needs-review",
                    f"{what} {read}",
                    if_migrated=True,
                )
                continue
            loader, reason = self._check(collection, node)
            if reason is not None:
                self.report(
                    collection.statement,
                    "needs-review",
                    f"{what} collects outputs over a sharded loader and holds this "
                    f"process's share only; not gathered: {reason}",
                    if_migrated=True,
                )
                continue
            assert loader is not None
            per_batch = collection.granularity == "batch" and (
                rows_loop(self.index, collection, node) is None
            )
            self._after.setdefault(node, []).append(
                (collection.name, loader, per_batch)
            )
            extra = ", per_batch=True" if per_batch else ""
            self.report(
                collection.statement,
                "fixed",
                f"{what} collects outputs over the sharded `{loader}` -> "
                f"accel.gather_in_order({collection.name}, {loader}{extra}) after "
                "the loop (every process holds the original's, in order)",
            )

    def _loop_of(self, node: cst.CSTNode) -> cst.For | None:
        for ancestor in self.index.ancestors(node):
            if (
                isinstance(ancestor, cst.For)
                and self.index.loader_loop(ancestor.iter)[0]
            ):
                return ancestor
        return None

    def _check(
        self, collection: Collection, loop: cst.For
    ) -> tuple[str | None, str | None]:
        """(the loader's source, None) when the shape is proven; else (None, why)."""
        statement = collection.statement
        if collection.item:
            return None, (
                "each batch adds an integer item of a value (such as `out[0]`), which "
                "may be "
                "one output of several (a row per sample) or the batch's first row "
                "(one per batch, taken from each process's share): the rule cannot "
                "tell which, and only the first is gathered in order"
            )
        if collection.selection:
            return None, (
                "the rule cannot tell that it holds one value per sample (a selection "
                "such as `idx[pred != y]`, or a computed value), which gathering in "
                "order needs"
            )
        rows = rows_loop(self.index, collection, loop)
        for ancestor in self.index.ancestors(statement):
            if ancestor is loop:
                break
            if ancestor is rows:
                continue  # one value per row of the batch: per sample
            if isinstance(ancestor, (cst.For, cst.While)):
                return None, "it is filled in a loop inside the loop over batches"
            if isinstance(
                ancestor,
                (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp, cst.Lambda),
            ):
                return None, "it is filled in a comprehension"
            if isinstance(ancestor, (cst.If, cst.Try, cst.IfExp, cst.BooleanOperation)):
                return None, "it is filled under a condition, not once per batch"
            if isinstance(ancestor, cst.FunctionDef):
                return None, "it is filled in a nested function"
        if collection.rebound and not self._empty_at_start(collection, loop):
            return None, (
                f"`{collection.name}` is also bound to something else, and the rule "
                "cannot prove it is empty each time the loop starts"
            )
        uses = [
            n
            for n in findall(loop, m.Name(collection.name))
            if self.index.key(n) == self.index.key(_target_name(statement))
            and not self._counted(n)
        ]
        if len(uses) != 1:
            return None, f"`{collection.name}` is used elsewhere in the loop too"
        if findall(loop.body, m.Break() | m.Continue() | m.Return()):
            return None, "the loop may leave a batch early (break, continue or return)"
        if any(
            self.index.loader_loop(a.iter)[0]
            for a in self.index.ancestors(loop)
            if isinstance(a, cst.For)
        ):
            return None, "the loop is inside another loop over a loader"
        loader = self._loader(loop.iter)
        if loader is None:
            return None, "the loader is not a variable the rule can name after the loop"
        if not self.index.uniform(loop):
            return (
                None,
                "not every process reaches the loop together (a collective there could hang)"
                + collective_note(self, loop),
            )
        return loader, None

    def _counted(self, name: cst.CSTNode) -> bool:
        """``len(xs)`` read in a test or a log line only (SQuAD's ``if
        len(all_results) % 1000 == 0: logger.info(...)``): a read of the count,
        which gathering after the loop leaves as it was. A count that feeds a
        value (``base = len(results)`` then ``uid=base + i``) is this process's
        own, and each process's values would repeat once gathered."""
        arg = self.index.parent(name)
        call = self.index.parent(arg) if isinstance(arg, cst.Arg) else None
        if not (
            isinstance(call, cst.Call)
            and len(call.args) == 1
            and "builtins.len" in self.index.qualnames(call.func)
        ):
            return False
        child: cst.CSTNode = call
        for ancestor in self.index.ancestors(call):
            if isinstance(ancestor, (cst.If, cst.While)):
                return child is ancestor.test
            if isinstance(ancestor, cst.Call) and _logs(ancestor):
                return True
            if isinstance(
                ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)
            ):
                return False
            child = ancestor
        return False

    def _empty_at_start(self, collection: Collection, loop: cst.For) -> bool:
        """Every run of ``loop`` starts with the list empty: an ``xs = []`` runs
        before it in a block around it, inside every loop around it (so it runs
        again before each run), and every other binding of ``xs`` comes before
        that one or after the loop, never inside it or in between
        (``all_preds = np.array(all_preds)`` after the loop of each epoch)."""
        key = self.index.key(_target_name(collection.statement))
        values = [v for v in self.index.values.get(key, []) if v is not None]
        if len(values) != len(self.index.values.get(key, [])):
            return False  # a binding the index cannot see the value of
        end = self._span(loop)[1]
        around = self._loops_around(loop)
        for empty in (v for v in values if empty_list(v)):
            if not self._runs_before(empty, loop):
                continue
            if not all(
                any(a is outer for a in self.index.ancestors(empty)) for outer in around
            ):
                continue
            empty_start = self._span(empty)[0]
            if all(
                self._span(other)[1] < empty_start or self._span(other)[0] > end
                for other in values
                if not empty_list(other)
            ):
                return True
        return False

    def _loops_around(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        """The loops around ``node`` in its function."""
        found: list[cst.CSTNode] = []
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                found.append(ancestor)
        return found

    def _runs_before(self, value: cst.BaseExpression, loop: cst.For) -> bool:
        """``value``'s statement is in a block of statements around ``loop`` (in
        the same function), before the statement that holds the loop."""
        statement = next(
            (
                a
                for a in self.index.ancestors(value)
                if isinstance(a, cst.SimpleStatementLine)
            ),
            None,
        )
        if statement is None:
            return False
        block = self.index.parent(statement)
        node: cst.CSTNode = loop
        for ancestor in self.index.ancestors(loop):
            if ancestor is block:
                body = list(getattr(block, "body", ()))
                return (
                    statement in body
                    and node in body
                    and (body.index(statement) < body.index(node))
                )
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
            node = ancestor
        return False

    def _span(self, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
        position = self.get_metadata(PositionProvider, node)
        return (
            (position.start.line, position.start.column),
            (position.end.line, position.end.column),
        )

    def _loader(self, iterable: cst.BaseExpression) -> str | None:
        inner = self.index._loop_wrapped(iterable)
        while inner is not None and not self.index.is_runtime_call(
            iterable, "prepare_dataloader"
        ):
            if (
                isinstance(iterable, cst.Call)
                and sum(a.keyword is None for a in iterable.args) != 1
                and attr_chain(iterable.func) != "enumerate"
            ):
                return None  # zip(a, b): which loader?
            iterable, inner = inner, self.index._loop_wrapped(inner)
        if isinstance(iterable, cst.Name):
            return iterable.value
        if (
            isinstance(iterable, cst.Attribute)
            and isinstance(iterable.value, cst.Name)
            and iterable.value.value == "self"
        ):
            return attr_chain(iterable)
        return None

    def leave_For(
        self, original_node: cst.For, updated_node: cst.For
    ) -> cst.For | cst.FlattenSentinel[cst.BaseStatement]:
        planned = self._after.get(original_node)
        if not planned:
            return updated_node
        lines = []
        for name, loader, per_batch in planned:
            args = [
                cst.Arg(value=cst.Name(name)),
                cst.Arg(value=cst.parse_expression(loader)),
            ]
            if per_batch:
                args.append(
                    cst.Arg(
                        keyword=cst.Name("per_batch"),
                        value=cst.Name("True"),
                        equal=cst.AssignEqual(
                            whitespace_before=cst.SimpleWhitespace(""),
                            whitespace_after=cst.SimpleWhitespace(""),
                        ),
                    )
                )
            lines.append(
                cst.SimpleStatementLine(
                    body=[
                        cst.Assign(
                            targets=[cst.AssignTarget(target=cst.Name(name))],
                            value=self.runtime_call("gather_in_order", args),
                        )
                    ]
                )
            )
        return cst.FlattenSentinel([updated_node, *lines])


def _target_name(statement: cst.CSTNode) -> cst.Name:
    if isinstance(statement, cst.AugAssign):
        return statement.target  # type: ignore[return-value]
    assert isinstance(statement, cst.Call) and isinstance(statement.func, cst.Attribute)
    return statement.func.value  # type: ignore[return-value]


#: Calls whose arguments are only shown (a log line of the count).
_LOG_METHODS = frozenset(
    {"info", "debug", "warning", "log", "write", "set_description", "set_postfix"}
)


def _logs(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "print"
    return isinstance(func, cst.Attribute) and (
        func.attr.value in _LOG_METHODS or func.attr.value == "print"
    )
