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
  by the batch size (``loss.item() * x.size(0)``) it is a sum.

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
``total += my_metric(out, y)``) is left alone and reported as needs-review.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

import libcst as cst
import libcst.matchers as m

from ..analysis import Key, attr_chain, variable_names
from ..patterns import counts_samples, string_value
from ..rule import Rule

Kind = Literal["sum", "mean", "unknown"]

_SUM_METHODS = {"sum", "size", "numel", "count_nonzero"}
_MEAN_LOSS_HINTS = ("loss", "cross_entropy", "kl_div")


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

    # -- planning, on the original tree -----------------------------------------------
    def visit_For(self, node: cst.For) -> None:
        if not self.index.loader_loop(node.iter)[0]:
            return
        increments = list(self._increments(node))
        if not increments:
            return
        if not self.index.uniform(node):
            for aug in increments:
                self.report(
                    aug,
                    "needs-review",
                    "sum over a sharded loader in a rank-dependent branch: not combined across processes",
                )
            return
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
                self._wrap[aug] = "global_loss"
                self.report(
                    aug,
                    "fixed",
                    f"`{name}` adds batch-mean losses -> accel.global_loss(...) per batch",
                )
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

    def _kind(self, value: cst.BaseExpression, loop: cst.For, depth: int = 0) -> Kind:
        """Is the increment a sum (counts, sum-reduced losses) or a batch mean?"""
        if depth > 3:
            return "unknown"
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, cst.Divide):
                # `/ len(loader)`, `/ steps`: the divisor does not make a mean a sum.
                return self._kind(value.left, loop, depth)
            if isinstance(value.operator, cst.Multiply) and (
                counts_samples(self.index, value.left)
                or counts_samples(self.index, value.right)
            ):
                return "sum"  # a batch mean times the batch size
        reduction = self._reduction(value)
        if reduction == "sum":
            return "sum"
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
        if isinstance(value, cst.Integer):
            return "sum"
        # `loss.item()` where `loss = criterion(...)` earlier in the loop.
        keys = [self.index.key(n) for n in variable_names(value)]
        kinds = {
            self._kind(v, loop, depth + 1)
            for key in keys
            if key is not None
            for v in self.index.values.get(key, ())
            if v is not None and self._inside(v, loop)
        }
        if kinds == {"sum"} or kinds == {"mean"}:
            return kinds.pop()  # type: ignore[return-value]
        return "unknown"

    def _inside(self, node: cst.CSTNode, loop: cst.For) -> bool:
        return any(a is loop for a in self.index.ancestors(node))

    def _reduction(self, node: cst.CSTNode) -> str | None:
        for arg in m.findall(node, m.Arg(keyword=m.Name("reduction"))):
            return string_value(arg.value)  # type: ignore[attr-defined]
        return None

    def _mean_loss(self, call: cst.Call) -> bool:
        """A loss call with the default (mean) reduction: ``F.nll_loss(...)``,
        ``criterion(...)`` where ``criterion = nn.CrossEntropyLoss()``."""
        if self._reduction(call) is not None:
            return self._reduction(call) == "mean"
        for name in self.qualnames(call.func):
            if name.startswith("torch.nn.functional.") and any(
                h in name for h in _MEAN_LOSS_HINTS
            ):
                return True
        key: Key | None = self.index.key(call.func)
        for value in self.index.values.get(key, ()) if key else ():
            if isinstance(value, cst.Call) and self._reduction(value) in (None, "mean"):
                if any(
                    q.startswith("torch.nn.") and q.endswith("Loss")
                    for q in self.qualnames(value.func)
                ):
                    return True
        return False

    # -- rewriting --------------------------------------------------------------------
    def leave_AugAssign(
        self, original_node: cst.AugAssign, updated_node: cst.AugAssign
    ) -> cst.AugAssign:
        how = self._wrap.get(original_node)
        if how is None:
            return updated_node
        value = updated_node.value
        if how == "global_loss":
            value = self._global_loss(value)
        else:
            value = self.runtime_call("reduce", [cst.Arg(value=value)])
        return updated_node.with_changes(value=value)

    def _global_loss(self, value: cst.BaseExpression) -> cst.BaseExpression:
        """``x.item()`` -> ``accel.global_loss(x).item()``, ``float(x)`` ->
        ``float(accel.global_loss(x))``, ``a / n`` and ``a * 2`` -> the loss's side,
        ``a + b`` -> both terms; other forms (tensors) wrapped whole.
        ``global_loss`` takes a tensor, never a number."""
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, (cst.Add, cst.Subtract)):
                return value.with_changes(  # the global loss of each term
                    left=self._global_loss(value.left),
                    right=self._global_loss(value.right),
                )
            if isinstance(value.operator, cst.Divide) or m.findall(
                value.left, m.Call()
            ):
                return value.with_changes(left=self._global_loss(value.left))
            return value.with_changes(right=self._global_loss(value.right))
        if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[])):
            func = value.func  # type: ignore[attr-defined]
            inner = self.runtime_call("global_loss", [cst.Arg(value=func.value)])
            return value.with_changes(func=func.with_changes(value=inner))  # type: ignore[attr-defined]
        if m.matches(value, m.Call(func=m.Name("float"), args=[m.Arg(keyword=None)])):
            arg = value.args[0]  # type: ignore[attr-defined]
            inner = self.runtime_call("global_loss", [cst.Arg(value=arg.value)])
            return value.with_changes(args=[arg.with_changes(value=inner)])  # type: ignore[attr-defined]
        return self.runtime_call("global_loss", [cst.Arg(value=value)])

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
