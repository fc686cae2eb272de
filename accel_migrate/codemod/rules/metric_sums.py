"""AM009 metric-sums: sums accumulated over a sharded loader are combined across processes.

## What
In a loop over a data loader, a variable set to zero before the loop and
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
  by the batch size (``loss.item() * x.size(0)``) it is a sum. A loss function
  reached through a parameter (``criterion`` passed in by the caller as
  ``nn.CrossEntropyLoss()`` or ``F.cross_entropy``) counts as what the callers
  pass;
- per-batch values collected in objects made before the loop, with
  ``meter.update(loss.item(), x.size(0))``, ``values.append(...)`` or
  ``values[k] = ...``, are made the original's per-batch values: a batch mean
  becomes ``accel.global_loss(...)`` (a number from one of the script's functions,
  ``accel.global_loss(torch.as_tensor(...)).item()``), a sum or a count
  ``accel.reduce(...)``. What the object then holds, and everything computed from
  it after the loop (``sum(values)``, ``meter.avg``), is the original's;
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
list: each process holds its share). Combining per batch is one collective per
batch and per value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import libcst as cst
import libcst.matchers as m

from ..analysis import Key, attr_chain, variable_names
from ..patterns import counts_samples, string_value
from ..reduction.logged import logged_weight
from ..rule import Rule, keyword_arg
from .collected_outputs import defer_to_collected_outputs

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

Kind = Literal["sum", "mean", "unknown"]
#: How a per-batch value depends on this process's batch (see ``_form``).
Form = Literal["constant", "linear", "nonlinear", "opaque", "other"]

_SUM_METHODS = {"sum", "size", "numel", "count_nonzero"}
_MEAN_LOSS_HINTS = ("loss", "cross_entropy", "kl_div")
#: Methods that collect a value into an object made before the loop.
_COLLECTORS = {"append", "insert", "update", "add", "add_"}
#: Objects whose collected values are already combined across processes.
_SYNCED_PREFIXES = ("torchmetrics.",)
#: Functions of numbers (or of 0-d tensors) that read nothing but their arguments.
_PURE_PREFIXES = ("math.", "numpy.", "torch.")
_PURE_BUILTINS = frozenset(
    f"builtins.{name}" for name in ("abs", "round", "pow", "min", "max", "float")
)


class MetricSums(Rule):
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

    # -- planning, on the original tree -----------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        if not self.index.loader_loop(node.iter)[0]:
            return
        increments = list(self._increments(node))
        collections = list(self._collections(node))
        if not increments and not collections:
            return
        if not self.index.uniform(node):
            for aug in increments:
                self.report(
                    aug,
                    "needs-review",
                    "sum over a sharded loader in a rank-dependent branch: not combined across processes",
                )
            for statement, _, what in collections:
                self.report(
                    statement,
                    "needs-review",
                    f"values collected with `{what}` in a rank-dependent branch hold this process's share; not combined across processes",
                )
            return
        for statement, values, what in collections:
            self._plan_collection(statement, values, what, node)
        reduce_after: list[str] = []
        for aug in increments:
            name = attr_chain(aug.target)
            assert name is not None
            kind = self._kind(aug.value, node)
            if kind == "unknown":
                self.report(
                    aug,
                    "needs-review",
                    f"cannot tell whether `{name}` sums or averages over batches; it holds this process's share only",
                )
            elif kind == "mean":
                self._plan_mean(aug, name, node)
            elif self._read_inside(node, name, aug):
                self._wrap[aug] = "reduce"
                self.report(
                    aug,
                    "fixed",
                    f"`{name}` is read inside the loop -> summed across processes at every step",
                )
            elif name not in reduce_after and not self._reduced_after(node, name):
                reduce_after.append(name)
                self.report(
                    aug, "fixed", f"`{name}` -> accel.reduce({name}) after the loop"
                )
        if reduce_after:
            self._after[node] = reduce_after

    # -- numbers computed from batch means ------------------------------------------------
    def _plan_mean(self, aug: cst.AugAssign, name: str, loop: cst.For) -> None:
        """``name += value``, a batch mean: combined per batch as the whole batch's.

        ``accel.global_loss`` takes a tensor. A Python number (``loss.item()``,
        ``10 * log10(1 / mse.item())``) is combined according to how it depends on
        the batch: linearly (``acc = (...).mean().item()``): weighted by each
        process's share, as a tensor; through a non-linear function (PSNR): the
        losses it is computed from are made the whole batch's first, so every
        process computes the original's value; anything else: reported.
        """
        returned = self._returned_tensor(aug.value)
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
        form = self._form(aug.value, loop, reads)
        value = f"`{_code(aug.value)}`"
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
            )
        elif (
            form == "linear"
            and not _direct_reads(aug.value)
            and all(_read_of(r) is not r for r in reads)  # a number, not a tensor
        ):
            if self._torch_name is None:
                self.report(
                    aug,
                    "needs-review",
                    f"`{name}` adds {value}, a batch mean that is a number; it holds "
                    "this process's share (the file does not import torch)",
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

    def _form(
        self,
        value: cst.BaseExpression,
        loop: cst.CSTNode,
        reads: list[cst.BaseExpression],
        depth: int = 0,
    ) -> Form:
        """How ``value`` depends on this process's batch: not at all ("constant"),
        linearly on batch-mean losses ("linear": plus, minus, times or over a
        constant), through other arithmetic or pure functions of them
        ("nonlinear"), through a function of this file ("opaque"), or otherwise
        ("other": tensors, sums, unknown names). ``reads`` collects the batch-mean
        reads it is computed from (``mse.item()``, ``float(mse)``, ``mse``)."""
        if depth > 3:
            return "other"
        if isinstance(value, (cst.Integer, cst.Float)):
            return "constant"
        if isinstance(value, cst.UnaryOperation) and isinstance(
            value.operator, (cst.Minus, cst.Plus)
        ):
            return self._form(value.expression, loop, reads, depth)
        if _read_of(value) is not value:
            if self._kind(value, loop) != "mean":
                return "other"
            reads.append(value)
            return "linear"
        if isinstance(value, cst.BinaryOperation):
            left = self._form(value.left, loop, reads, depth)
            right = self._form(value.right, loop, reads, depth)
            forms = {left, right}
            if forms & {"other", "opaque"}:
                return (
                    "opaque" if "opaque" in forms and "other" not in forms else "other"
                )
            if forms == {"constant"}:
                return "constant"
            op = value.operator
            if isinstance(op, (cst.Add, cst.Subtract)):
                return "nonlinear" if "nonlinear" in forms else "linear"
            if isinstance(op, cst.Multiply) and "constant" in forms:
                return left if right == "constant" else right
            if isinstance(op, cst.Divide) and right == "constant":
                return left
            return "nonlinear"
        if isinstance(value, cst.Call):
            if self.index.local_function(value.func):
                inner: list[cst.BaseExpression] = []
                returned = self._returned_form(value, depth)
                if returned != "other":
                    return returned  # a linear mean (accuracy in percent), or not
                forms = {self._form(a.value, loop, inner, depth) for a in value.args}
                if forms - {"constant", "other"} or self._returns_float(value):
                    return "opaque"
                return "other"
            names = self.qualnames(value.func)
            if not names or not all(
                n.startswith(_PURE_PREFIXES) or n in _PURE_BUILTINS for n in names
            ):
                return "other"
            if not value.args or any(a.star or a.keyword for a in value.args):
                return "other"
            forms = {self._form(a.value, loop, reads, depth) for a in value.args}
            if forms & {"other", "opaque"}:
                return (
                    "opaque" if "opaque" in forms and "other" not in forms else "other"
                )
            return "constant" if forms == {"constant"} else "nonlinear"
        if isinstance(value, cst.Name):
            key = self.index.key(value)
            values = self.index.values.get(key, []) if key is not None else []
            if not values or any(v is None for v in values):
                return "other"
            if all(isinstance(v, (cst.Integer, cst.Float)) for v in values):
                return "constant"
            if len(values) != 1 or not self._inside(values[0], loop):
                return "other"
            source = values[0]
            if isinstance(source, cst.Call) and (
                self._mean_loss(source)
                or m.matches(
                    source, m.Call(func=m.Attribute(attr=m.Name("mean")), args=[])
                )
            ):
                reads.append(value)  # a batch-mean loss tensor
                return "linear"
            return self._form(source, loop, reads, depth + 1)
        return "other"

    # -- values collected per batch ------------------------------------------------------
    def _collections(
        self, loop: cst.For
    ) -> Iterator[tuple[cst.CSTNode, list[cst.BaseExpression], str]]:
        """Per-batch values collected into an object made before the loop: the
        statement (or call), the values, and how it is written."""
        divergence = self.index.divergence
        for call in m.findall(loop.body, m.Call(func=m.Attribute())):
            assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            method = call.func.attr.value
            if method not in _COLLECTORS or call not in divergence.local_mutations:
                continue
            receiver = call.func.value
            if not self._made_before(receiver, loop):
                continue
            if any(a.star for a in call.args):
                continue
            values = [a.value for a in call.args]
            name = attr_chain(receiver)
            yield call, values, f"{name}.{method}(...)"
        for statement in m.findall(loop.body, m.Assign() | m.AugAssign()):
            if isinstance(statement, cst.Assign):
                if statement not in divergence.local_stores:
                    continue
                targets = [t.target for t in statement.targets]
            else:
                assert isinstance(statement, cst.AugAssign)
                if not isinstance(statement.target, cst.Subscript):
                    continue
                if not divergence.rank_local(statement):
                    continue
                targets = [statement.target]
            if len(targets) != 1 or not isinstance(targets[0], cst.Subscript):
                continue
            container = targets[0].value
            if not self._made_before(container, loop):
                continue
            name = attr_chain(container)
            op = "=" if isinstance(statement, cst.Assign) else "+="
            yield statement, [statement.value], f"{name}[...] {op} ..."  # type: ignore[union-attr]

    def _made_before(self, receiver: cst.BaseExpression, loop: cst.For) -> bool:
        """A variable set before ``loop`` (and not in it): an object that outlives
        the loop's batches. Not a loader, a progress bar, or a metric object that
        combines itself across processes."""
        key = self.index.key(receiver)
        if key is None or key in self.index.loaders:
            return False
        values = self.index.values.get(key, [])
        if not values or any(v is not None and self._inside(v, loop) for v in values):
            return False
        for value in values:
            if isinstance(value, cst.Call):
                names = self.qualnames(value.func)
                if any(n.startswith(_SYNCED_PREFIXES) for n in names):
                    return False
                if names & _TQDM:
                    return False
        return True

    def _plan_collection(
        self,
        statement: cst.CSTNode,
        values: list[cst.BaseExpression],
        what: str,
        loop: cst.For,
    ) -> None:
        plan: dict[cst.BaseExpression, str] = {}
        for value in values:
            if self._has_runtime_call(value) or not self._rank_local(value, loop):
                continue
            returned = self._returned_tensor(value)
            if returned is not None:
                self.report(
                    statement,
                    "needs-review",
                    f"values collected with `{what}` are the loss tensors "
                    f"`{returned}` returns, this process's share of each batch; the "
                    "rule does not follow what the collection is used for: collect "
                    "accel.global_loss(loss).item() for the whole batch's",
                )
                return
            kind = self._kind(value, loop)
            if kind == "unknown":
                if defer_to_collected_outputs(self, statement):
                    return  # outputs collected per batch (predictions): AM029's
                self.report(
                    statement,
                    "needs-review",
                    f"values collected with `{what}` hold this process's share "
                    "(the rule cannot tell whether they are sums or batch means)",
                )
                return
            reads: list[cst.BaseExpression] = []
            form = self._form(value, loop, reads) if kind == "mean" else "other"
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
                )
                return
            if form == "nonlinear":
                # Computed from the whole batch's losses: the original's values.
                self._reads.update(reads)
                plan[value] = "as_is"
                continue
            if kind == "sum":
                plan[value] = "reduce"
            elif self._returns_number(value) or (
                form == "linear"
                and not _direct_reads(value)
                and all(_read_of(r) is not r for r in reads)
            ):
                if self._torch_name is None:
                    self.report(
                        statement,
                        "needs-review",
                        f"values collected with `{what}` hold this process's share (batch means that are numbers; the file does not import torch)",
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
        self.report(
            statement,
            "fixed",
            f"`{what}` collects per-batch values -> the whole batch's "
            "(accel.global_loss for batch means, accel.reduce for sums and counts)",
        )

    def _returned_tensor(self, value: cst.BaseExpression) -> str | None:
        """The function whose returned loss tensor ``value`` is (``loss`` from
        ``loss = self._run_batch(x, y)``, or the call itself), if it is one."""
        returned = self.index.returned_losses
        if isinstance(value, cst.Call):
            found = returned.returned_by(value)
        else:
            key = self.index.key(value)
            call = returned.call_of(key) if key is not None else None
            found = returned.returned_by(call) if call is not None else None
        return found.function.name.value if found is not None else None

    def _rank_local(self, value: cst.BaseExpression, loop: cst.For) -> bool:
        """Does ``value`` depend on this process's batch? (A constant step of a
        counter, ``meter.update(x, 1)``'s ``1``, does not.)"""
        if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)):
            return False
        return bool(variable_names(value)) or bool(m.findall(value, m.Call()))

    @cached_property
    def _torch_name(self) -> str | None:
        for statement in self.index.module.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Import):
                        for alias in small.names:
                            if attr_chain(alias.name) == "torch":
                                asname = alias.asname
                                return (
                                    "torch"
                                    if asname is None
                                    else attr_chain(asname.name)  # type: ignore[arg-type]
                                )
        return None

    def _returns_number(self, value: cst.BaseExpression) -> bool:
        """A call of a function of this file whose every return is a number
        (``....item()``, ``float(...)``, times or over a constant)."""
        if not isinstance(value, cst.Call):
            return False
        target = self.index.callee(value)
        if target is None:
            return False
        returns = [
            r.value  # type: ignore[attr-defined]
            for r in m.findall(target[0].body, m.Return())
            if r.value is not None  # type: ignore[attr-defined]
        ]
        return bool(returns) and all(_is_number(r) for r in returns)

    def _returned_form(self, call: cst.Call, depth: int) -> Form:
        """ "linear" when every return of the called function of this file is
        linear in batch means it computes itself (``return
        pred.eq(target).float().mean().item() * 100.0``), "opaque" when one is not,
        else "other"."""
        target = self.index.callee(call)
        if target is None or depth > 2:
            return "other"
        function = target[0]
        forms = {
            self._form(r.value, function, [], depth + 1)  # type: ignore[attr-defined]
            for r in m.findall(function.body, m.Return())
            if r.value is not None  # type: ignore[attr-defined]
        }
        if "linear" in forms and forms <= {"linear", "constant"}:
            return "linear"
        if forms & {"nonlinear", "opaque"}:
            return "opaque"
        return "other"

    def _returns_float(self, call: cst.Call) -> bool:
        """A function of this file whose every return is a Python number, also
        through math or NumPy (``return 10 * math.log10(1 / mse.item())``)."""
        target = self.index.callee(call)
        if target is None:
            return False
        returns = [
            r.value  # type: ignore[attr-defined]
            for r in m.findall(target[0].body, m.Return())
            if r.value is not None  # type: ignore[attr-defined]
        ]
        return bool(returns) and all(self._looks_float(r) for r in returns)

    def _looks_float(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.BinaryOperation):
            sides = (value.left, value.right)
            return all(
                self._looks_float(v) or isinstance(v, (cst.Integer, cst.Float))
                for v in sides
            ) and not all(isinstance(v, (cst.Integer, cst.Float)) for v in sides)
        if isinstance(value, cst.Call) and any(
            n.startswith(("math.", "numpy.")) for n in self.qualnames(value.func)
        ):
            return True
        return _is_number(value)

    def _increments(self, loop: cst.For) -> Iterator[cst.AugAssign]:
        """``x += ...`` in the loop, on a variable set to zero before the loop."""
        for aug in m.findall(loop.body, m.AugAssign(operator=m.AddAssign())):
            assert isinstance(aug, cst.AugAssign)
            name = attr_chain(aug.target)
            if name is None or self._has_runtime_call(aug.value):
                continue
            if not self.index.divergence.rank_local(aug):
                continue  # a step counter: the same on every rank
            if self._zeroed_before(loop, name):
                yield aug

    def _has_runtime_call(self, node: cst.CSTNode) -> bool:
        return any(
            self.index.is_runtime_call(c, "reduce", "global_loss", "gather")
            for c in m.findall(node, m.Call())
        )

    def _zeroed_before(self, loop: cst.For, name: str) -> bool:
        node: cst.CSTNode = loop
        for ancestor in self.index.ancestors(loop):
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                body: Sequence[cst.CSTNode] = ancestor.body
                position = next((i for i, s in enumerate(body) if s is node), 0)
                if any(_zeroes(statement, name) for statement in body[:position]):
                    return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return False
            node = ancestor
        return False

    def _reduced_after(self, loop: cst.For, name: str) -> bool:
        """``name = accel.reduce(name)`` already follows the loop (a second run)."""
        block = self.index.parent(loop)
        body = getattr(block, "body", ())
        position = next((i for i, s in enumerate(body) if s is loop), None)
        if position is None:
            return False
        for statement in body[position + 1 :]:
            assign = (
                statement.body[0]
                if isinstance(statement, cst.SimpleStatementLine)
                else None
            )
            if not (
                isinstance(assign, cst.Assign)
                and self.index.is_runtime_call(assign.value, "reduce")
            ):
                return False
            if attr_chain(assign.targets[0].target) == name:
                return True
        return False

    def _read_inside(self, loop: cst.For, name: str, aug: cst.AugAssign) -> bool:
        for reference in m.findall(loop.body, m.Name() | m.Attribute()):
            if attr_chain(reference) != name:  # type: ignore[arg-type]
                continue
            if any(a is aug for a in self.index.ancestors(reference)):
                continue
            return True
        return False

    def _kind(
        self, value: cst.BaseExpression, context: cst.CSTNode, depth: int = 0
    ) -> Kind:
        """Is the value a sum (counts, sum-reduced losses) or a batch mean?
        Variables are read from their assignments inside ``context`` (the loop, or
        the function a value is returned from)."""
        if depth > 3:
            return "unknown"
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, cst.Divide):
                # `/ len(loader)`, `/ steps`: the divisor does not make a mean a sum.
                return self._kind(value.left, context, depth)
            if isinstance(value.operator, cst.Multiply):
                if counts_samples(self.index, value.left) or counts_samples(
                    self.index, value.right
                ):
                    return "sum"  # a batch mean times the batch size
                if isinstance(value.right, (cst.Integer, cst.Float)):
                    return self._kind(value.left, context, depth)
                if isinstance(value.left, (cst.Integer, cst.Float)):
                    return self._kind(value.right, context, depth)
        reduction = self._reduction(value)
        if reduction == "sum":
            return "sum"
        read = _read_of(value)
        if isinstance(read, cst.Call) and (
            self._mean_loss(read)
            or m.matches(read, m.Call(func=m.Attribute(attr=m.Name("mean")), args=[]))
        ):
            return "mean"  # `criterion(out.view(-1, out.size(-1)), y).item()`
        calls = list(m.findall(value, m.Call()))
        if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in _SUM_METHODS for c in calls):  # type: ignore[attr-defined]
            return "sum"
        if m.findall(
            value, m.Subscript(value=m.Attribute(attr=m.Name("shape")))
        ) or any(
            "builtins.len" in self.qualnames(c.func) for c in calls  # type: ignore[attr-defined]
        ):
            return "sum"
        if any(self._mean_loss(c) for c in calls):  # type: ignore[arg-type]
            return "mean"
        if any(
            m.matches(c, m.Call(func=m.Attribute(attr=m.Name("mean")), args=[]))
            for c in calls
        ):
            return "mean"  # the mean over this process's batch
        if isinstance(value, cst.Integer):
            return "sum"
        inner = _read_of(value)
        if isinstance(inner, cst.Call) and self.index.local_function(inner.func):
            return self._returned_kind(inner, depth)
        # `loss.item()` where `loss = criterion(...)` earlier in the loop.
        keys = [self.index.key(n) for n in variable_names(value)]
        kinds = set()
        for key in keys:
            if key is None:
                continue
            for v in self.index.values.get(key, ()):
                if v is None:
                    kinds.add(self._unpacked_kind(key, context, depth))
                elif m.matches(v, m.Name("None")):
                    continue  # `loss = None` when no targets are given
                elif self._inside(v, context):
                    kinds.add(self._kind(v, context, depth + 1))
        if kinds == {"sum"} or kinds == {"mean"}:
            return kinds.pop()  # type: ignore[return-value]
        return "unknown"

    def _returned_kind(self, call: cst.Call, depth: int) -> Kind:
        """The kind of what a function of this file returns."""
        target = self.index.callee(call)
        if target is None:
            return "unknown"
        function = target[0]
        kinds = {
            self._kind(r.value, function, depth + 1)  # type: ignore[attr-defined]
            for r in m.findall(function.body, m.Return())
            if r.value is not None and not m.matches(r.value, m.Name("None"))  # type: ignore[attr-defined]
        }
        if kinds == {"sum"} or kinds == {"mean"}:
            return kinds.pop()  # type: ignore[return-value]
        return "unknown"

    def _unpacked_kind(self, key: Key, context: cst.CSTNode, depth: int) -> Kind:
        """``logits, loss = model(x, y)``: the kind of the model's ``forward``
        returns at that position (a model class of this file)."""
        for assign in m.findall(context, m.Assign()):
            assert isinstance(assign, cst.Assign)
            target = assign.targets[0].target if len(assign.targets) == 1 else None
            if not isinstance(target, (cst.Tuple, cst.List)):
                continue
            positions = [
                i
                for i, e in enumerate(target.elements)
                if isinstance(e.value, cst.Name) and self.index.key(e.value) == key
            ]
            if len(positions) != 1 or not isinstance(assign.value, cst.Call):
                continue
            forward = self._forward_of(assign.value.func)
            if forward is None:
                return "unknown"
            kinds = set()
            for returned in m.findall(forward.body, m.Return()):
                value = returned.value  # type: ignore[attr-defined]
                if not isinstance(value, cst.Tuple) or len(value.elements) != len(
                    target.elements
                ):
                    return "unknown"
                kinds.add(
                    self._kind(value.elements[positions[0]].value, forward, depth + 1)
                )
            if kinds == {"sum"} or kinds == {"mean"}:
                return kinds.pop()  # type: ignore[return-value]
            return "unknown"
        return "unknown"

    def _forward_of(self, model: cst.BaseExpression) -> cst.FunctionDef | None:
        """The ``forward`` of the class of this file that ``model`` holds."""
        key = self.index.key(model)
        classes = set()
        for source in self._sources(key) if key is not None else []:
            core = _unwrapped(self.index, source)
            cls = (
                self.index.local_class(core.func)
                if isinstance(core, cst.Call)
                else None
            )
            if cls is None:
                return None
            classes.add(cls)
        if len(classes) != 1:
            return None
        cls = classes.pop()
        for statement in cls.body.body:  # type: ignore[union-attr]
            if (
                isinstance(statement, cst.FunctionDef)
                and statement.name.value == "forward"
            ):
                return statement
        return None

    @cached_property
    def _passed(self) -> dict[Key, list[cst.BaseExpression]]:
        """Parameters of the file's functions -> the arguments their calls pass."""
        passed: dict[Key, list[cst.BaseExpression]] = {}
        for call in self.index.calls:
            for key, value in self.index.arguments(call):
                passed.setdefault(key, []).append(value)
        return passed

    def _sources(self, key: Key, depth: int = 0) -> list[cst.BaseExpression]:
        """What ``key`` may hold: the values assigned to it and, for a parameter,
        the arguments of its calls, through plain aliases (``a = b``)."""
        found: list[cst.BaseExpression] = []
        for value in [*self.index.values.get(key, ()), *self._passed.get(key, ())]:
            if value is None:
                continue
            inner = self.index.key(value) if depth < 3 else None
            if (
                inner is not None
                and inner != key
                and (inner in self.index.values or inner in self._passed)
            ):
                found.extend(self._sources(inner, depth + 1))
            else:
                found.append(value)
        return found

    def _inside(self, node: cst.CSTNode, context: cst.CSTNode) -> bool:
        return any(a is context for a in self.index.ancestors(node))

    def _reduction(self, node: cst.CSTNode) -> str | None:
        for arg in m.findall(node, m.Arg(keyword=m.Name("reduction"))):
            return string_value(arg.value)  # type: ignore[attr-defined]
        return None

    def _mean_loss(self, call: cst.Call) -> bool:
        """A loss call with the default (mean) reduction: ``F.nll_loss(...)``,
        ``criterion(...)`` where ``criterion = nn.CrossEntropyLoss()``, or where
        every caller passes such a loss (``F.cross_entropy`` itself included)."""
        if self._reduction(call) is not None:
            return self._reduction(call) == "mean"
        if self._mean_loss_function(call.func):
            return True
        key: Key | None = self.index.key(call.func)
        sources = self._sources(key) if key is not None else []
        return bool(sources) and all(
            self._mean_loss_module(_unwrapped(self.index, v))
            or self._mean_loss_function(v)
            for v in sources
        )

    def _mean_loss_function(self, func: cst.BaseExpression) -> bool:
        return any(
            name.startswith("torch.nn.functional.")
            and any(h in name for h in _MEAN_LOSS_HINTS)
            for name in self.qualnames(func)
        )

    def _mean_loss_module(self, value: cst.BaseExpression) -> bool:
        return (
            isinstance(value, cst.Call)
            and self._reduction(value) in (None, "mean")
            and any(
                q.startswith("torch.nn.") and q.endswith("Loss")
                for q in self.qualnames(value.func)
            )
        )

    # -- rewriting --------------------------------------------------------------------
    def _collected(
        self, original: cst.BaseExpression, updated: cst.BaseExpression
    ) -> cst.BaseExpression:
        how = self._collect.get(original)
        if how == "reduce":
            return self.runtime_call("reduce", [cst.Arg(value=updated)])
        if how == "global_loss":
            return self._global_loss(updated)
        if how == "global_number":
            return self._global_number(updated)
        return updated  # "as_is": its batch-mean reads are made the whole batch's

    def _global_number(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """A batch mean that is a number -> ``accel.global_loss(torch.as_tensor(v)).item()``."""
        tensor = cst.parse_expression(f"{self._torch_name}.as_tensor(x)")
        assert isinstance(tensor, cst.Call)
        tensor = tensor.with_changes(args=[cst.Arg(value=value)])
        inner = self.runtime_call("global_loss", [cst.Arg(value=tensor)])
        return cst.Call(func=cst.Attribute(value=inner, attr=cst.Name("item")))

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if original_node in self._reads:
            return self._global_loss(updated_node)
        return updated_node

    def leave_Name(
        self, original_node: cst.Name, updated_node: cst.Name
    ) -> cst.BaseExpression:
        if original_node in self._reads:
            return self.runtime_call("global_loss", [cst.Arg(value=updated_node)])
        return updated_node

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        if original_node.value in self._collect:
            return updated_node.with_changes(
                value=self._collected(original_node.value, updated_node.value)
            )
        return updated_node

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign:
        if original_node.value in self._collect:
            return updated_node.with_changes(
                value=self._collected(original_node.value, updated_node.value)
            )
        return updated_node

    def leave_AugAssign(
        self, original_node: cst.AugAssign, updated_node: cst.AugAssign
    ) -> cst.AugAssign:
        if original_node.value in self._collect:
            return updated_node.with_changes(
                value=self._collected(original_node.value, updated_node.value)
            )
        how = self._wrap.get(original_node)
        if how is None:
            return updated_node
        value = updated_node.value
        if how == "global_loss":
            value = self._global_loss(value, self._counts.get(original_node))
        elif how == "global_number":
            value = self._global_number(value)
        else:
            value = self.runtime_call("reduce", [cst.Arg(value=value)])
        return updated_node.with_changes(value=value)

    def _global_loss(
        self, value: cst.BaseExpression, count: cst.BaseExpression | None = None
    ) -> cst.BaseExpression:
        """``x.item()`` -> ``accel.global_loss(x).item()``, ``float(x)`` ->
        ``float(accel.global_loss(x))``, ``a / n`` and ``a * 2`` -> the loss's side,
        ``a + b`` -> both terms; other forms (tensors) wrapped whole (the walk of
        ``reduction.logged.loss_leaves``). ``global_loss`` takes a tensor, never a
        number. ``count``: the token count of the one loss wrapped."""
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, (cst.Add, cst.Subtract)):
                return value.with_changes(  # the global loss of each term
                    left=self._global_loss(value.left),
                    right=self._global_loss(value.right),
                )
            if isinstance(value.operator, cst.Divide) or m.findall(
                value.left, m.Call()
            ):
                return value.with_changes(left=self._global_loss(value.left, count))
            return value.with_changes(right=self._global_loss(value.right, count))
        weight = [keyword_arg("count", count.deep_clone())] if count is not None else []
        if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[])):
            func = value.func  # type: ignore[attr-defined]
            inner = self.runtime_call(
                "global_loss", [cst.Arg(value=func.value), *weight]
            )
            return value.with_changes(func=func.with_changes(value=inner))  # type: ignore[attr-defined]
        if m.matches(value, m.Call(func=m.Name("float"), args=[m.Arg(keyword=None)])):
            arg = value.args[0]  # type: ignore[attr-defined]
            inner = self.runtime_call(
                "global_loss", [cst.Arg(value=arg.value), *weight]
            )
            return value.with_changes(args=[arg.with_changes(value=inner)])  # type: ignore[attr-defined]
        return self.runtime_call("global_loss", [cst.Arg(value=value), *weight])

    def leave_For(
        self, original_node: cst.For, updated_node: cst.For
    ) -> cst.For | cst.FlattenSentinel[cst.BaseStatement]:
        names = self._after.get(original_node)
        if not names:
            return updated_node
        lines = [
            cst.SimpleStatementLine(
                body=[
                    cst.Assign(
                        targets=[cst.AssignTarget(target=cst.parse_expression(name))],
                        value=self.runtime_call(
                            "reduce", [cst.Arg(value=cst.parse_expression(name))]
                        ),
                    )
                ]
            )
            for name in names
        ]
        return cst.FlattenSentinel([updated_node, *lines])


_TQDM = frozenset(
    f"{module}.{name}"
    for module in ("tqdm", "tqdm.auto", "tqdm.notebook", "tqdm.std", "tqdm.rich")
    for name in ("tqdm", "trange")
)
_SAME_OBJECT = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "train", "eval"}
)


def _unwrapped(index: ModuleIndex, expr: cst.BaseExpression) -> cst.BaseExpression:
    """``accel.prepare_model(Net().to(d))`` -> ``Net()``; ``nn.L1Loss().to(d)`` ->
    ``nn.L1Loss()``."""
    while True:
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _SAME_OBJECT
        ):
            expr = expr.func.value
        elif index.is_runtime_call(expr, "prepare_model") and expr.args:  # type: ignore[attr-defined]
            expr = expr.args[0].value  # type: ignore[attr-defined]
        else:
            return expr


def _read_of(value: cst.BaseExpression) -> cst.BaseExpression:
    """``f(x).item()`` and ``float(f(x))`` -> ``f(x)``."""
    if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[])):
        return value.func.value  # type: ignore[attr-defined]
    if m.matches(value, m.Call(func=m.Name("float"), args=[m.Arg(keyword=None)])):
        return value.args[0].value  # type: ignore[attr-defined]
    return value


def _direct_reads(value: cst.BaseExpression) -> bool:
    """``loss.item()``, ``float(loss)``, and those plus, minus, times or over a
    number: forms ``_global_loss`` rewrites read by read."""
    if isinstance(value, cst.BinaryOperation):
        sides = (value.left, value.right)
        if not any(_direct_reads(side) for side in sides):
            return False
        return all(
            _direct_reads(side) or isinstance(side, (cst.Integer, cst.Float))
            for side in sides
        )
    return _read_of(value) is not value


def _code(node: cst.BaseExpression) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _is_number(value: cst.BaseExpression) -> bool:
    """``x.item()``, ``float(x)``, and those times, over, plus or minus a number."""
    if isinstance(value, (cst.Integer, cst.Float)):
        return True
    if isinstance(value, cst.BinaryOperation):
        return _is_number(value.left) and _is_number(value.right)
    return _read_of(value) is not value


def _zeroes(statement: cst.CSTNode, name: str) -> bool:
    """``name = 0`` / ``0.0`` / ``torch.zeros(...)`` / ``torch.tensor(0.0)`` (also ``a = b = 0``)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign) and any(
            attr_chain(t.target) == name for t in small.targets
        ):
            return _is_zero(small.value)
        if isinstance(small, cst.Assign):
            for target in small.targets:
                if isinstance(target.target, cst.Tuple) and isinstance(
                    small.value, cst.Tuple
                ):
                    for t, v in zip(
                        target.target.elements, small.value.elements, strict=False
                    ):
                        if attr_chain(t.value) == name:
                            return _is_zero(v.value)
    return False


def _is_zero(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Integer, cst.Float)):
        return float(value.evaluated_value) == 0.0
    if isinstance(value, cst.Call):
        chain = attr_chain(value.func) or ""
        if chain.endswith(("zeros", "zeros_like")):
            return True
        if (
            chain.endswith("tensor")
            and value.args
            and isinstance(value.args[0].value, (cst.Integer, cst.Float))
        ):
            return float(value.args[0].value.evaluated_value) == 0.0  # type: ignore[union-attr]
    return False
