"""AM007 tensor-backward: ``loss.backward(...)`` becomes ``accel.backward(loss, ...)``.

## What
Rewrites ``x.backward(...)`` on tensors, arguments kept
(``retain_graph=True``, a gradient tensor). A ``backward`` method of the user's own
objects is left alone: calls on ``self``, on ``super()``, inside a method that is
itself named ``backward`` (custom autograd functions), and on variables holding
instances of this file's classes (other than ``nn.Module`` outputs).

## Why
``accel.backward`` applies what the strategy and precision need before the real
``backward``: the fp16 loss scale, and a weight that keeps the averaged gradient
equal to the gradient of the global batch when a batch does not split evenly
across processes (a short last batch).

## Example
```python
# before
loss = F.nll_loss(output, target)
loss.backward()
# after
loss = F.nll_loss(output, target)
accel.backward(loss)
```

## Fix safety
Safe for mean-reduced losses, the default of every ``torch.nn`` loss. A loss
built with ``reduction="sum"`` is a sum over this process's share only; the
rewrite is still made but reported as needs-review, because the averaged
gradient is then 1/world_size of the original's (scale the learning rate, or
use a mean). So is ``backward(retain_graph=True)``: under DDP the gradients of a
second backward through the same forward are not averaged across processes, and
the processes' models drift apart (add the losses and call backward once).
And so is a loss that goes through a statistic of the batch (``x.var(0)``,
``(f.mean(0) - g.mean(0)).pow(2)``, as in feature matching): each process
computes it over its own share of the batch, which no weighting of the
per-process losses turns back into the original's. A plain mean over the batch
of per-sample losses (``losses.mean(0)`` as the whole loss) is fine.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..patterns import MODULE_BASES, string_value
from ..rule import Rule


class TensorBackward(Rule):
    code = "AM007"
    name = "tensor-backward"
    summary = "loss.backward() -> accel.backward(loss)"

    @cached_property
    def non_tensor_classes(self) -> set[cst.ClassDef]:
        modules = self.index.local_subclasses(MODULE_BASES)
        return {cls for cls in self.index.classes if cls not in modules}

    def _sum_reduced(self, expr: cst.CSTNode | None, depth: int = 0) -> bool:
        """Is ``expr`` built from a loss with reduction="sum" (or size_average=False),
        following variables a few assignments back?"""
        if expr is None or depth > 3:
            return False
        for arg in m.findall(
            expr, m.Arg(keyword=m.Name("reduction") | m.Name("size_average"))
        ):
            value = arg.value  # type: ignore[attr-defined]
            if string_value(value) == "sum" or m.matches(value, m.Name("False")):
                return True
        for name in m.findall(expr, m.Name()):
            key = self.index.key(name)  # type: ignore[arg-type]
            if key is not None and any(
                self._sum_reduced(v, depth + 1) for v in self.index.values.get(key, ())
            ):
                return True
        return False

    def _batch_statistic(self, expr: cst.CSTNode | None, depth: int = 0) -> str | None:
        """A statistic over the batch dimension that the loss goes through
        non-linearly (``(f.mean(0) - g.mean(0)).pow(2)``, ``x.var(0)``), following
        variables a few assignments back: its spelling, or None."""
        if expr is None or depth > 3:
            return None
        for call in m.findall(
            expr,
            m.Call(
                func=m.Attribute(attr=m.Name("mean") | m.Name("var") | m.Name("std"))
            ),
        ):
            assert isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)
            dims = [
                a.value
                for a in call.args
                if a.keyword is None or a.keyword.value == "dim"
            ][:1]
            if not (dims and m.matches(dims[0], m.Integer("0"))):
                continue
            # The mean over the batch of per-sample losses, as the whole loss, is
            # what per-process weighting rebuilds exactly; anything else is not.
            if call.func.attr.value != "mean" or call is not expr:
                return f".{call.func.attr.value}(0)"
        for name in m.findall(expr, m.Name()):
            key = self.index.key(name)  # type: ignore[arg-type]
            if key is None:
                continue
            for value in self.index.values.get(key, ()):
                found = self._batch_statistic(value, depth + 1)
                if found is not None:
                    return found
        return None

    def _user_object(self, receiver: cst.BaseExpression) -> bool:
        if isinstance(receiver, cst.Name) and receiver.value in {"self", "cls"}:
            return True
        if isinstance(receiver, cst.Call) and m.matches(receiver.func, m.Name("super")):
            return True
        key = self.index.key(receiver)
        if key is None:
            return False
        for value in self.index.values.get(key, ()):
            if (
                isinstance(value, cst.Call)
                and self.index.local_class(value.func) in self.non_tensor_classes
            ):
                return True
        return False

    def _in_backward_method(self, node: cst.CSTNode) -> bool:
        function = self.index.enclosing_function(node)
        return function is not None and function.name.value == "backward"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        func = original_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
            return updated_node
        if self.index.is_runtime_call(original_node, "backward"):
            return updated_node  # already migrated
        if self._user_object(func.value) or self._in_backward_method(original_node):
            return updated_node
        if any(arg.star for arg in original_node.args):
            self.report(original_node, "needs-review", "backward(*args): left as it is")
            return updated_node
        updated_func = updated_node.func
        assert isinstance(updated_func, cst.Attribute)
        receiver = (
            updated_func.value.with_changes(lpar=(), rpar=())
            if updated_func.value.lpar
            else updated_func.value
        )
        args = [cst.Arg(value=receiver), *updated_node.args]
        # The call is rewritten either way (accel.backward is what every process
        # must call); a concern makes it one needs-review finding, not also "fixed".
        concerns = []
        if self._sum_reduced(func.value):
            concerns.append(
                'the loss uses reduction="sum": each process sums its share of the batch, so the averaged gradient is 1/world_size of the original'
            )
        statistic = self._batch_statistic(func.value)
        if statistic is not None:
            concerns.append(
                f"the loss goes through a statistic of the batch (`{statistic}`): each process computes it over its share of the batch only, so the loss and its gradients differ from the original's"
            )
        if self._retains_graph(original_node):
            concerns.append(
                "retain_graph=True: under DDP a second backward through the same forward is not averaged across processes; add the losses and call accel.backward once"
            )
        if concerns:
            self.report(
                original_node,
                "needs-review",
                "x.backward() -> accel.backward(x), but " + "; ".join(concerns),
            )
            return self.runtime_call("backward", args)
        self.report(original_node, "fixed", "x.backward() -> accel.backward(x)")
        return self.runtime_call("backward", args)

    @staticmethod
    def _retains_graph(call: cst.Call) -> bool:
        """``backward(retain_graph=...)`` with anything but False/None."""
        positional = [arg for arg in call.args if arg.keyword is None]
        named = [
            arg
            for arg in call.args
            if arg.keyword is not None and arg.keyword.value == "retain_graph"
        ]
        # Tensor.backward(gradient, retain_graph, create_graph, inputs)
        value = positional[1:2] + named
        return any(
            not m.matches(arg.value, m.Name("False") | m.Name("None")) for arg in value
        )
