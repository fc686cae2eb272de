"""AM040 parameter-gradients: ``torch.autograd.grad`` of a batch's loss with respect to a model's parameters stops the migration.

## What
Reports, as needs-review, and leaves the file unchanged: a call of
``torch.autograd.grad(loss, params, ...)`` (also ``from torch.autograd import
grad``, ``inputs=`` by keyword) whose inputs are a model's parameters
(``model.parameters()``, ``list(model.parameters())``, ``[p for p in
model.parameters() if p.requires_grad]``, ``[model.fc.weight, model.fc.bias]``,
also through a variable bound to one), in a file that shards a data loader, taken in a loop over that loader or
in a function such a loop runs. The shapes: plain SGD written through it (``for
p, g in zip(params, grads): p.data -= lr * g``), gradient surgery (PCGrad's
per-task gradients written into ``p.grad``), and a meta-learning inner step
over the whole batch (``grads = torch.autograd.grad(inner_loss,
model.parameters(), create_graph=True)``, fast weights ``w - lr * g``, then an
outer backward through them).
Also, in such a loop, a call of a method of a model class of another module
that takes ``torch.autograd.grad`` of what it is handed with respect to the
model's own parameters (VQGAN's ``calculate_lambda(perceptual_loss, g_loss)``
with ``torch.autograd.grad(perceptual_loss, last_layer.weight)``, an adaptive
weight of the GAN loss made from the ratio of the gradients' norms), also one
the class inherits from a base the project defines (``class VQGAN(VQBase)``).

Left to migrate: the second-order MAML step taken per task, in a loop over
the rows of the batch (``for i in range(xs.size(0))``, ``for x_s, y_s, x_q,
y_q in zip(...)`` over the batch's tensors) with ``create_graph=True``. Each
task's inner gradient reads its own row only, so every process computes the
same fast weights for its tasks as the original does, and the outer
``meta_loss.backward()``, a mean over the tasks, is averaged like any loss.
A gradient with respect to the batch (``torch.autograd.grad(d_out, x,
create_graph=True)``, WGAN-GP's penalty, a contractive autoencoder's Jacobian)
is not a parameter gradient and is left to the other rules.

## Why
``accel.prepare_model(...)`` averages gradients across the processes inside a
``backward`` pass: DDP's reducer runs when a gradient is accumulated into a
parameter's ``.grad``. ``torch.autograd.grad`` returns its gradients without
accumulating them, so nothing averages them: each process holds the gradient
of its own share of the batch. Applied by hand, every process updates its own
copy of the model and the copies drift apart from the first step, with no
error (the runtime can check a prepared optimizer's step, not ``p.data -=``).
An inner step over the batch differentiates the share's loss, not the batch's:
the fast weights and the meta-gradient differ from the original's, however
they are averaged afterwards.

## Example
```python
# before
for x, y in loader:
    loss = F.cross_entropy(model(x), y)
    grads = torch.autograd.grad(loss, params)
    for p, g in zip(params, grads):
        p.data -= lr * g
# after
# (unchanged) AM040 [needs-review] `torch.autograd.grad(loss, params)` returns
# the gradient of each process's share of the batch ... the file is left unchanged
```

## Fix safety
This rule never rewrites. Compute the gradients with ``loss.backward()`` (which
migrates to ``accel.backward(loss)``) and an optimizer, or, where the gradients
must be handled by hand, average each one across the processes before using it
(``accel.reduce(g) / accel.world_size()``, exact where every process holds as
many samples). For a meta-learning step over the batch, run the inner step
per task, or launch with one process.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..imported_draws import instance_facts
from ..model_methods import reads_step_value
from ..names import AUTOGRAD_GRAD
from ..patterns import argument
from ..rule import Rule
from ..subtrees import findall

#: How deep a variable holding the parameters is followed through assignments.
_DEPTH = 3


class ParameterGradients(Rule):
    code = "AM040"
    name = "parameter-gradients"
    summary = (
        "torch.autograd.grad(loss, model.parameters()) on a batch -> file left "
        "unchanged (nothing averages those gradients across processes)"
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.index.loaders:
            return
        if not self.is_call_to(node, AUTOGRAD_GRAD):
            self._model_method(node)
            return
        inputs = argument(node, 1, "inputs")
        if inputs is None or not self._parameters(inputs, 0):
            return
        loops = self._loader_loops(node)
        if not loops:
            return
        create_graph = argument(node, 4, "create_graph")
        per_task = create_graph is not None and m.matches(create_graph, m.Name("True"))
        if per_task and self._per_row(node, loops):
            return
        call = cst.Module([]).code_for_node(node)
        if len(call) > 80:
            call = call[:77] + "..."
        if per_task:
            why = (
                "the inner step differentiates each process's share of the batch, "
                "not the batch: the fast weights and the meta-gradient differ from "
                "the original's, however the outer backward averages them; run the "
                "inner step per task (a loop over the batch's rows), or launch "
                "with one process"
            )
        else:
            why = (
                "applied by hand (or written into .grad), every process updates its "
                "own copy of the model from its own share and the copies drift "
                "apart with no error; compute them with loss.backward() and an "
                "optimizer, or average each across the processes before using it "
                "(accel.reduce(g) / accel.world_size(), exact where every process "
                "holds as many samples)"
            )
        self.block(
            node,
            f"`{call}` returns the gradient of the model's parameters for this "
            "process's share of the batch, and no process averages it (DDP "
            "averages only gradients a backward accumulates into .grad): "
            f"{why}; the file is left unchanged",
        )

    def _model_method(self, node: cst.Call) -> None:
        """A call, in a loop over a sharded loader, of a method of a model class
        of another module that takes ``torch.autograd.grad`` with respect to
        the model's own parameters (VQGAN's ``calculate_lambda(perceptual_loss,
        g_loss)``: ``HelperFact.parameter_grads``)."""
        func = node.func
        if not isinstance(func, cst.Attribute) or not self._loader_loops(node):
            return
        method = func.attr.value
        for fact in sorted(
            instance_facts(self.index, func.value), key=lambda f: f.name
        ):
            grads = dict(fact.parameter_grads)
            if method not in grads:
                continue
            call = cst.Module([]).code_for_node(node)
            if len(call) > 80:
                call = call[:77] + "..."
            self.block(
                node,
                f"`{call}` runs `{fact.name}.{method}` ({fact.file}), which takes "
                f"{grads[method]}, the gradient of what it is handed with respect "
                "to the model's own parameters: after migration that is the "
                "gradient of this process's share of the batch, and no process "
                "averages it (DDP averages only gradients a backward accumulates "
                "into .grad), so what the method makes of it (an adaptive loss "
                "weight, a step) differs from the original's on each process; "
                "average the gradients across the processes in the method "
                "(accel.reduce(g) / accel.world_size(), exact where every process "
                "holds as many samples), or launch with one process; the file is "
                "left unchanged",
            )
            return

    def _parameters(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Is ``expr`` a model's parameters (a call of ``.parameters()`` in it,
        also through a variable bound to one)?"""
        if findall(
            expr,
            m.Call(
                func=m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters"))
            ),
        ) or m.matches(
            expr,
            m.Call(
                func=m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters"))
            ),
        ):
            return True
        if isinstance(expr, (cst.List, cst.Tuple)) and any(
            m.matches(e.value, m.Attribute(attr=m.Name("weight") | m.Name("bias")))
            for e in expr.elements
        ):
            return True  # [model.fc.weight, model.fc.bias]
        if depth >= _DEPTH:
            return False
        for name in findall(expr, m.Name()) + (
            [expr] if isinstance(expr, cst.Name) else []
        ):
            key = self.index.key(name)
            if key is None:
                continue
            for value in self.index.values.get(key, []):
                if value is not None and self._parameters(value, depth + 1):
                    return True
        return False

    def _loader_loops(self, node: cst.CSTNode) -> list[cst.For | cst.While]:
        """The loops over a data loader that run ``node`` (around it, or around a
        call of the function it is in)."""
        found: list[cst.For | cst.While] = []
        for path in self.index.loop_paths(node):
            for loop in path:
                if self.index.reads_loader(loop) and loop not in found:
                    found.append(loop)
        return found

    def _per_row(self, node: cst.Call, loops: list[cst.For | cst.While]) -> bool:
        """Is ``node`` inside a ``for`` loop, itself inside a loader loop, over the
        rows of that loop's batch (``range(x.size(0))``, ``range(len(x))``,
        ``zip(xs, ys)``, ``enumerate(xs)``, ``xs``)?"""
        for ancestor in self.index.ancestors(node):
            if not isinstance(ancestor, cst.For) or ancestor in loops:
                continue
            outer = [
                loop
                for loop in loops
                if any(a is loop for a in self.index.ancestors(ancestor))
            ]
            if not outer:
                continue
            rows = _rows(ancestor.iter)
            if rows and all(
                any(reads_step_value(self.index, r, loop) for loop in outer)
                for r in rows
            ):
                return True
        return False


def _rows(iterable: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The tensors whose rows ``iterable`` walks, or [] when it is not such a walk."""
    if isinstance(iterable, cst.Call) and m.matches(iterable.func, m.Name()):
        func = iterable.func.value  # type: ignore[attr-defined]
        args = [a.value for a in iterable.args]
        if func == "range" and len(args) == 1:
            count = args[0]
            if m.matches(
                count,
                m.Call(
                    func=m.Attribute(attr=m.Name("size")), args=[m.Arg(m.Integer("0"))]
                ),
            ):
                return [count.func.value]  # type: ignore[attr-defined]
            if m.matches(count, m.Call(func=m.Name("len"), args=[m.Arg()])):
                return [count.args[0].value]  # type: ignore[attr-defined]
            if m.matches(
                count,
                m.Subscript(
                    value=m.Attribute(attr=m.Name("shape")),
                    slice=[m.SubscriptElement(m.Index(m.Integer("0")))],
                ),
            ):
                return [count.value.value]  # type: ignore[attr-defined]
            return []
        if func in ("zip", "enumerate") and args:
            return args[:1] if func == "enumerate" else args
        return []
    if isinstance(iterable, cst.Name):
        return [iterable]
    return []
