"""Full-batch training: a step that runs the model over data made before its
loop, whole, with no loader and no slice (AM019's side of it).

tkipf/pygcn's ``train(epoch)``: ``output = model(features, adj)`` over every
node of the graph, ``loss_train = F.nll_loss(output[idx_train],
labels[idx_train])``, ``loss_train.backward()``, called once per epoch by ``for
epoch in range(args.epochs)``. Nothing in it can be split by
``accel.prepare_dataloader``: every process runs the same forward and backward
over the whole graph. The runtime weighs each process's loss as the whole loss
(no loader was sharded), so the averaged gradients are the original's: the run
matches, and does the work of one process N times over. AM019 says so.

``stored_inputs`` follows the backward's loss back through the variables the
step assigns (in the loop's body and the functions it calls, a few levels) to
the calls of a model (one AM004 prepared: ``patterns.prepared_models``), and
returns the arguments of those calls that are variables bound before the step
(not assigned in it, not a loop counter, not a parameter of the step's
function). Static only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

_DEPTH = 5


def stored_inputs(
    index: ModuleIndex,
    backward: cst.Call,
    loss: cst.BaseExpression,
    loop: cst.For | cst.While,
    models: set[Key],
) -> tuple[str, list[str]]:
    """(the model, its inputs bound before the step) for the loss ``loss`` of
    ``backward``, run by ``loop``; ("", []) when no model call of the loss
    takes such data."""
    regions: list[cst.CSTNode] = [loop.body]
    function = index.enclosing_function(backward)
    if function is not None and not _inside(index, function, loop):
        regions.append(function.body)
    counters = (
        {n.value for n in findall(loop.target, m.Name())}
        if isinstance(loop, cst.For)
        else set()
    )
    search = _Search(index, regions, counters, models)
    search.walk(loss, 0)
    return search.model, search.found


def _inside(index: ModuleIndex, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    return any(a is outer for a in index.ancestors(node))


class _Search:
    def __init__(
        self,
        index: ModuleIndex,
        regions: list[cst.CSTNode],
        counters: set[str],
        models: set[Key],
    ) -> None:
        self.index, self.regions = index, regions
        self.counters, self.models = counters, models
        self.model = ""
        self.found: list[str] = []
        self.seen: set[int] = set()

    def _in_step(self, node: cst.CSTNode) -> bool:
        return any(
            node is region or _inside(self.index, node, region)
            for region in self.regions
        )

    def walk(self, expr: cst.CSTNode, depth: int) -> None:
        if depth > _DEPTH or id(expr) in self.seen:
            return
        self.seen.add(id(expr))
        for call in findall(expr, m.Call()):
            assert isinstance(call, cst.Call)
            key = self.index.key(call.func)
            if key is not None and key in self.models:
                self._model_call(call)
        for name in findall(expr, m.Name()):
            key = self.index.key(name)  # type: ignore[arg-type]
            if key is None:
                continue
            for value in self.index.values.get(key, ()):
                if value is not None and self._in_step(value):
                    self.walk(value, depth + 1)

    def _model_call(self, call: cst.Call) -> None:
        """The variables bound before the step that an argument of the model
        call reads (``features``, ``adj @ features``, ``features.cuda()``)."""
        for arg in call.args:
            for name in findall(arg.value, m.Name()):
                assert isinstance(name, cst.Name)
                if name.value in self.counters or name.value in self.found:
                    continue
                if self.index.key(name) is not None and self._stored(name):
                    self.model = cst.Module([]).code_for_node(call.func)
                    self.found.append(name.value)

    def _stored(self, name: cst.Name) -> bool:
        """Bound before the step: every value of it is outside the step (and it
        has one: a parameter or an import has none)."""
        key = self.index.key(name)
        values = self.index.values.get(key, ()) if key is not None else ()
        unpacked = self.index.unpacked.get(key, ()) if key is not None else ()
        bindings = [v for v in values if v is not None]
        bindings += [value for value, _, _ in unpacked]
        if not bindings or len(bindings) < len(values):
            return False
        return not any(self._in_step(v) for v in bindings)
