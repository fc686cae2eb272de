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

``model.train_model(train_loader, test_loader, num_epochs, opt, ckpt_path)``
(``training_calls``) is the same hazard one level up: a method of the model
that runs its layers (``self(q, r)``) and backpropagates itself, so the whole
training loop runs past the prepared model's call.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex
from .imported_draws import instance_facts
from .index_syntax import ast_class
from .layer_methods import layer_calls, training_methods
from .model_methods import instance_classes
from .project_callers import caller_model_class
from .project_facts import HelperFact
from .reduction.placement import code
from .returned_loss import backpropagated
from .subtrees import findall

#: Reductions a loss method's value may be taken through before its backward.
_REDUCTIONS = frozenset({"mean", "sum"})
#: Tensor methods that scale or combine a value elementwise, followed like the
#: operators (beta-tcvae's ``obj.mean().mul(-1).backward()``).
_SCALINGS = frozenset({"mul", "div", "neg", "add", "sub", "multiply", "divide"})
#: The operators whose terms a backpropagated value reaches (``loss + reg``).
_TERMS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
#: How many assignments, terms and subscripts deep a value is followed.
_DEPTH = 6


@dataclass(frozen=True)
class MethodStep:
    """A backpropagated call of a model's layer-running method."""

    call: cst.Call  # `model.loss(xb, yb)`
    method: str
    where: str  # "`BiRnnCrf` in bi_lstm_crf/model/model.py", "`Tagger`"
    #: The method's own ``self.forward(x)`` (or ``self(x)``) call, in a class of
    #: this file: the model's call that the step skips.
    own_forward: cst.Call | None = None
    #: The first call, as written, by which the method runs the layers
    #: (``self.encoder(x)``, ``self(q, r)``: ``layer_methods.layer_calls``).
    runs: str = ""


def method_steps(index: ModuleIndex) -> list[MethodStep]:
    """Every backpropagated value of the file that is (or is a variable set to, or
    the ``.mean()`` / ``.sum()`` of) a call of such a method."""
    found: dict[cst.Call, MethodStep] = {}
    for call in index.calls:
        for tensor in backpropagated(index, call):
            for value in _values(index, tensor):
                step = _method_step(index, value)
                if step is not None and not _steps_other_models(index, call, step):
                    found.setdefault(step.call, step)
    return list(found.values())


def _steps_other_models(
    index: ModuleIndex, backward: cst.Call, step: MethodStep
) -> bool:
    """Is the optimizer stepped next after ``backward``, in its block, built over
    other models' parameters only (``.parameters()`` of receivers none of which
    is the method's)? TD3's actor step: ``actor_loss =
    -self.critic.Q1(state, self.actor(state)).mean()`` then
    ``self.actor_optimizer.step()`` over ``self.actor.parameters()``: the
    critic's gradients from it are never stepped (its own optimizer's
    ``zero_grad`` clears them), and a gradient the runtime did see unaveraged
    at a step would stop the run there."""
    line = next(
        (
            a
            for a in index.ancestors(backward)
            if isinstance(a, cst.SimpleStatementLine)
        ),
        None,
    )
    block = index.parent(line) if line is not None else None
    body = getattr(block, "body", None)
    if line is None or not isinstance(body, (list, tuple)) or line not in body:
        return False
    receiver = _aliases(index, step.call.func.value)  # type: ignore[attr-defined]
    steps = [
        call
        for statement in body[body.index(line) + 1 :]
        for call in findall(statement, m.Call(func=m.Attribute(attr=m.Name("step"))))
    ]
    # every optimizer stepped after it (TD3's actor step, then possibly the
    # critic's own in the same block, which would take the method's gradients)
    for call in steps:
        sources = _optimizer_sources(index, call.func.value)  # type: ignore[attr-defined]
        if not sources:
            return False
        held = set().union(*(_aliases(index, s) for s in sources.values()))
        if receiver & held:
            return False
    return bool(steps)


def _aliases(index: ModuleIndex, expr: cst.BaseExpression) -> set[str]:
    """``expr`` as code, with the names and attributes it is set to in the file,
    two assignments deep: LightGCN's ``self.model = recmodel`` beside
    ``optim.Adam(recmodel.parameters())`` makes ``self.model`` and ``recmodel``
    one model. A call's value is a new object, so none is followed through it."""
    found: set[str] = set()
    todo = [(expr, 0)]
    while todo:
        node, depth = todo.pop()
        spelled = code(node)
        if spelled in found:
            continue
        found.add(spelled)
        if depth >= 2:
            continue
        for value in _assigned(index, node):
            if isinstance(value, (cst.Name, cst.Attribute)):
                todo.append((value, depth + 1))
    return found


def _assigned(index: ModuleIndex, node: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Name):
        key = index.key(node)
        values = index.values.get(key, []) if key is not None else []
        return [v for v in values if v is not None]
    if m.matches(node, m.Attribute(value=m.Name("self"))):
        target = m.AssignTarget(
            target=m.Attribute(value=m.Name("self"), attr=m.Name(node.attr.value))  # type: ignore[attr-defined]
        )
        return [
            a.value  # type: ignore[attr-defined]
            for a in findall(index.module, m.Assign(targets=[target]))
        ]
    return []


def _optimizer_sources(
    index: ModuleIndex, optimizer: cst.BaseExpression
) -> dict[str, cst.BaseExpression] | None:
    """The receivers (as code) of the ``.parameters()`` calls every construction
    of ``optimizer`` (a name, or ``self.x`` assigned in the file) is handed as
    its parameters, nothing else; None where one is anything else."""
    if not isinstance(optimizer, cst.Name) and not m.matches(
        optimizer, m.Attribute(value=m.Name("self"))
    ):
        return None
    values: list[cst.BaseExpression | None]
    if isinstance(optimizer, cst.Name):
        # an unknown value (None: a parameter, a loop target) is no construction
        key = index.key(optimizer)
        values = list(index.values.get(key, [])) if key is not None else []
    else:
        values = list(_assigned(index, optimizer))
    found: dict[str, cst.BaseExpression] = {}
    for value in values:
        if (
            isinstance(value, cst.Call)
            and index.is_runtime_call(value, "prepare_optimizer")
            and value.args
        ):
            value = value.args[0].value  # a rule before this one wrapped it
        if not isinstance(value, cst.Call) or not value.args:
            return None
        first = value.args[0]
        if first.keyword is not None and first.keyword.value != "params":
            return None
        if not _parameters_only(first.value, found):
            return None
    return found


def _parameters_only(
    expr: cst.BaseExpression, found: dict[str, cst.BaseExpression]
) -> bool:
    """``R.parameters()``, a ``list(...)`` of it, a sum or a display of such:
    each ``R`` added to ``found``."""
    if isinstance(expr, cst.Call):
        func = expr.func
        if m.matches(func, m.Name("list")) and len(expr.args) == 1:
            return _parameters_only(expr.args[0].value, found)
        if m.matches(func, m.Attribute(attr=m.Name("parameters"))) and not expr.args:
            found[code(func.value)] = func.value  # type: ignore[attr-defined]
            return True
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _parameters_only(expr.left, found) and _parameters_only(
            expr.right, found
        )
    if isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
        return all(_parameters_only(e.value, found) for e in expr.elements)
    return False


def training_calls(index: ModuleIndex) -> list[MethodStep]:
    """Every call of the file of a model's method that runs the model's layers
    and backpropagates itself (``HelperFact.training_methods``, or the same of
    a model class of the file)."""
    found: list[MethodStep] = []
    modules = set(index.local_subclasses(["torch.nn."]))
    for call in index.calls:
        if not isinstance(call.func, cst.Attribute):
            continue
        method = call.func.attr.value
        receiver = call.func.value
        where = runs = ""
        for fact in sorted(instance_facts(index, receiver), key=lambda f: f.where):
            if fact.returns == "model" and method in fact.training_methods:
                where = fact.where
                runs = dict(fact.layer_calls).get(method, "")
                break
        if not where:
            for cls in sorted(
                instance_classes(index, receiver) & modules, key=lambda c: c.name.value
            ):
                parsed = ast_class(cls)
                if parsed is not None and method in training_methods(parsed):
                    where = f"`{cls.name.value}`"
                    runs = dict(layer_calls(parsed)).get(method, "")
                    break
        if where:
            found.append(MethodStep(call, method, where, runs=runs))
    return found


def _values(index: ModuleIndex, tensor: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The expressions the backpropagated ``tensor`` is built from: itself, the
    values of the variables it reads, the terms of a sum or product
    (``loss = loss + reg_loss``), the value a subscript or an unpacking takes
    its element from (``loss, reg_loss = self.model.bpr_loss(u, p, n)``,
    LightGCN's ``BPRLoss.stageOne``), each reduction stripped."""
    found: list[cst.BaseExpression] = []
    queue: list[tuple[cst.BaseExpression, int]] = [(tensor, 0)]
    seen: set[int] = set()
    while queue:
        expr, depth = queue.pop(0)
        expr = _unreduced(expr)
        if id(expr) in seen or depth > _DEPTH:
            continue
        seen.add(id(expr))
        if isinstance(expr, cst.Name):
            key = index.key(expr)
            if key is None:
                continue
            queue += [
                (v, depth + 1) for v in index.values.get(key, []) if v is not None
            ]
            queue += [(v, depth + 1) for v, _, _ in index.unpacked.get(key, [])]
        elif isinstance(expr, cst.BinaryOperation) and isinstance(
            expr.operator, _TERMS
        ):
            queue += [(expr.left, depth + 1), (expr.right, depth + 1)]
        elif isinstance(expr, cst.Subscript):
            queue.append((expr.value, depth + 1))
        elif isinstance(expr, cst.UnaryOperation) and isinstance(
            expr.operator, cst.Minus
        ):
            queue.append((expr.expression, depth + 1))
        elif (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _SCALINGS
        ):
            queue.append((expr.func.value, depth + 1))
            queue += [(a.value, depth + 1) for a in expr.args]
        else:
            found.append(expr)
    return found


def _unreduced(value: cst.BaseExpression) -> cst.BaseExpression:
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _REDUCTIONS
    ):  # ``.mean()``, also over a dimension (``.mean(0)``)
        value = value.func.value
    return value


def _method_step(index: ModuleIndex, value: cst.BaseExpression) -> MethodStep | None:
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return None
    method = value.func.attr.value
    receiver = value.func.value
    for fact in sorted(instance_facts(index, receiver), key=lambda f: f.where):
        if fact.returns == "model" and method in fact.layer_methods:
            return MethodStep(
                value, method, fact.where, runs=dict(fact.layer_calls).get(method, "")
            )
    modules = index.local_subclasses(["torch.nn."])
    for cls in sorted(
        instance_classes(index, receiver) & set(modules), key=lambda c: c.name.value
    ):
        runs = dict(_local_layer_calls(cls))
        if method in runs:
            return MethodStep(
                value,
                method,
                f"`{cls.name.value}`",
                _own_forward(cls, method),
                runs[method],
            )
    for fact in _handed_classes(index, receiver, 0):
        if method in fact.layer_methods:
            return MethodStep(
                value, method, fact.where, runs=dict(fact.layer_calls).get(method, "")
            )
    return None


def _own_forward(cls: cst.ClassDef, method: str) -> cst.Call | None:
    """The first ``self.forward(...)`` or ``self(...)`` call of ``method`` of
    ``cls``, or of a method of the class it calls on ``self``."""
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    queue, seen = [method], set()
    while queue:
        name = queue.pop(0)
        if name in seen or name not in methods:
            continue
        seen.add(name)
        for call in findall(methods[name].body, m.Call()):
            assert isinstance(call, cst.Call)
            func = call.func
            if m.matches(func, m.Name("self")) or m.matches(
                func, m.Attribute(value=m.Name("self"), attr=m.Name("forward"))
            ):
                return call
            if m.matches(func, m.Attribute(value=m.Name("self"))):
                queue.append(func.attr.value)  # type: ignore[attr-defined]
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


def _local_layer_calls(cls: cst.ClassDef) -> tuple[tuple[str, str], ...]:
    parsed = ast_class(cls)
    return layer_calls(parsed) if parsed is not None else ()
