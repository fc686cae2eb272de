"""Training steps that backpropagate what a model's own method returns, where that
method runs the model's layers past its call (AM042's second part).

``loss = model.loss(xb, yb)``; ``loss.backward()`` with the BiLSTM-CRF's
``def loss(self, xs, tags)`` (``layer_methods``): the prepared model is never
called, so DDP and FSDP never run their hooks, and each process would keep the
gradients of its own share. ``accel.unwrap(model).loss(...)`` is the same call
(the wrapped module's method), and no rewrite routes a method other than
``forward`` through the wrapper's call, so the step is reported and the file
left unchanged. The model may be one the batch's other files hand a class of
this file (DARTS's ``Architect(model, args)``, whose ``step`` backpropagates
``self.model._loss(...)``, a method of ``model_search.Network`` that runs
``self(input)``: the module's own call, past the prepared wrapper).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from .analysis import ModuleIndex
from .imported_draws import instance_facts
from .index_syntax import ast_class
from .layer_methods import layer_methods
from .model_methods import instance_classes
from .project_callers import caller_model_class
from .project_facts import HelperFact
from .returned_loss import backpropagated

#: Reductions a loss method's value may be taken through before its backward.
_REDUCTIONS = frozenset({"mean", "sum"})


@dataclass(frozen=True)
class MethodStep:
    """A backpropagated call of a model's layer-running method."""

    call: cst.Call  # `model.loss(xb, yb)`
    method: str
    where: str  # "`BiRnnCrf` in bi_lstm_crf/model/model.py", "`Tagger`"


def method_steps(index: ModuleIndex) -> list[MethodStep]:
    """Every backpropagated value of the file that is (or is a variable set to, or
    the ``.mean()`` / ``.sum()`` of) a call of such a method."""
    found: dict[cst.Call, MethodStep] = {}
    for call in index.calls:
        for tensor in backpropagated(index, call):
            for value in _values(index, tensor):
                step = _method_step(index, value)
                if step is not None:
                    found.setdefault(step.call, step)
    return list(found.values())


def _values(index: ModuleIndex, tensor: cst.BaseExpression) -> list[cst.BaseExpression]:
    tensor = _unreduced(tensor)
    if isinstance(tensor, cst.Name):
        key = index.key(tensor)
        values = index.values.get(key, []) if key is not None else []
        return [_unreduced(v) for v in values if v is not None]
    return [tensor]


def _unreduced(value: cst.BaseExpression) -> cst.BaseExpression:
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _REDUCTIONS
        and not value.args
    ):
        value = value.func.value
    return value


def _method_step(index: ModuleIndex, value: cst.BaseExpression) -> MethodStep | None:
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return None
    method = value.func.attr.value
    receiver = value.func.value
    for fact in sorted(instance_facts(index, receiver), key=lambda f: f.where):
        if fact.returns == "model" and method in fact.layer_methods:
            return MethodStep(value, method, fact.where)
    modules = index.local_subclasses(["torch.nn."])
    for cls in sorted(
        instance_classes(index, receiver) & set(modules), key=lambda c: c.name.value
    ):
        if method in _local_layer_methods(cls):
            return MethodStep(value, method, f"`{cls.name.value}`")
    for fact in _handed_classes(index, receiver, 0):
        if method in fact.layer_methods:
            return MethodStep(value, method, fact.where)
    return None


def _handed_classes(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int
) -> list[HelperFact]:
    """The model classes of another file of the batch that every caller hands
    the parameter ``expr`` holds (DARTS's ``Architect(model, args)``, kept as
    ``self.model``: ``self.model._loss(...)``), through variables and ``self``
    attributes (``project_callers.caller_model_class``)."""
    key = index.key(expr)
    if key is None or depth > 3:
        return []
    fact = caller_model_class(index, key)
    if fact is not None:
        return [fact]
    found: list[HelperFact] = []
    for value in index.values.get(key, []):
        if isinstance(value, (cst.Name, cst.Attribute)):
            found += _handed_classes(index, value, depth + 1)
    return found


def _local_layer_methods(cls: cst.ClassDef) -> tuple[str, ...]:
    parsed = ast_class(cls)
    return layer_methods(parsed) if parsed is not None else ()
