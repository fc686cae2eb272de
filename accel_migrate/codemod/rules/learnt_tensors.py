"""AM031 learnt-tensors: a tensor the script trains outside any nn.Module.

## What
A variable bound, outside any loop, to a tensor that has a gradient of its own and
belongs to no module: ``torch.zeros(1, requires_grad=True)``, ``torch.randn(3,
1).requires_grad_()``, a bare ``nn.Parameter(...)`` (not an attribute of a
module; an attribute of a plain class is one, SAC's ``self.log_alpha =
torch.zeros(1, requires_grad=True)`` in the agent's ``__init__``), and that the
script trains:

- an optimizer is given it (``optim.SGD([w, b], lr=0.1)``, ``Adam(list(
  model.parameters()) + [log_temperature])``, also through variables);
- or it is updated by hand (``w -= lr * w.grad`` under ``torch.no_grad()``,
  ``log_scale.data -= lr * log_scale.grad``, ``w.data.sub_(...)``), also by a
  function of this file it is passed to that steps its arguments by their
  ``.grad`` (``sgd([w, b], lr, batch_size)``, the textbook "from scratch" shape);

while a training loop over a data loader reads it. Such a setup is not migrated:
the file is left unchanged, with a needs-review finding at the tensor. One that
an optimizer steps is reported so even where no loader feeds it (``Adam([
self.log_alpha])`` over a replay buffer's batches): the migrated optimizer
would be prepared, and the runtime refuses a tensor of no prepared model at its
first step (``UnpreparedParametersError``).

## Why
``accel.prepare_model(...)`` averages the gradients of the parameters of the
modules it prepares, and only those. The gradient of a tensor of no module stays
each process's own, computed from its share of each batch: every process would
update its own copy, and they drift apart from the first step on, silently. A
training setup is migrated whole or not at all: sharding its data without
averaging that gradient would train a different copy in each process.

## Example
```python
# before
w = torch.normal(0, 0.01, size=(2,), requires_grad=True)
for X, y in loader:
    loss = ((X @ w - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
# after
# the same lines, unchanged; a needs-review finding at `w = ...`
```

What the finding asks for, which then migrates: the weights as the parameters
of a module (``model = nn.Linear(2, 1)``, ``loss = ((model(X).squeeze(1) -
y) ** 2).mean()``, ``optimizer = torch.optim.SGD(model.parameters(), lr=lr)``).

## Fix safety
Nothing is rewritten; the finding blocks the whole file. Make the tensor an
``nn.Parameter`` of a module the script prepares (``model.log_temperature =
nn.Parameter(torch.zeros(1))`` before ``accel.prepare_model(...)``, or a small
``nn.Module`` holding the weights) and migrate again. A ``# accel-migrate: skip``
comment on the statement the finding points at lifts the block (the user has
taken that tensor over, for example by averaging its gradient with
``accel.reduce``). A tensor created inside the loop (an input to a gradient
penalty, an adversarial perturbation) is data, not a learnt tensor, and is left
alone; so is one no data loader feeds and no optimizer steps, updated by hand
(every process computes the same gradient, and no prepared optimizer holds it).
One no data loader feeds that an optimizer steps (neural-style-pt's
``img = nn.Parameter(img)`` optimised by ``optim.LBFGS([img])``, SAC's
temperature) blocks the file too: the runtime refuses a prepared optimizer's
tensor of no prepared model, and where nothing is sharded there is nothing
to divide; the finding says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import Key, variable_names
from ..names import DATALOADER_CALLS, is_optimizer_class
from ..optimizer_lookups import looked_up_optimizer
from ..optimizer_subclasses import local_optimizer_classes
from ..rule import Rule
from ..subtrees import findall
from ..trained_models import extra_values, snippet
from ..unshardable import unshardable_reason

_PARAMETER_CALLS = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})
#: In-place methods that are not an update of the tensor's value.
_NOT_UPDATES = frozenset({"requires_grad_", "retain_grad", "share_memory_"})
#: How far an optimizer's ``params`` are followed back through variables.
_DEPTH = 4


class LearntTensors(Rule):
    code = "AM031"
    name = "learnt-tensors"
    summary = (
        "a tensor trained outside any nn.Module (w = torch.zeros(1, "
        "requires_grad=True)) -> needs-review; the file is left unchanged"
    )

    def visit_Module(self, node: cst.Module) -> None:
        step_reads = self._step_reads if self._shards_data else set()
        for key, created in self._created.items():
            name = key[1]
            if key in step_reads:
                trained = self._optimizer_of(key) or self._hand_update_of(key)
                if trained is not None:
                    self.block(created, self._fed_message(name, created, trained))
                continue
            stepped = self._optimizer_of(key)
            if stepped is not None:
                self.block(created, self._stepped_message(name, created, stepped))

    def _fed_message(self, name: str, created: cst.CSTNode, trained: str) -> str:
        return (
            f"`{name}` is a tensor this script trains outside any nn.Module "
            f"(`{snippet(created)}`, line {self._line(created)}; {trained}), and "
            f"a training loop over a data loader reads it: accel.prepare_model("
            f"...) prepares modules only, so the gradient of `{name}` would stay "
            "each process's own, computed from its share of each batch, and "
            f"every process would update its own copy of `{name}`. Make it an "
            "nn.Parameter of a module the script prepares (`model."
            f"{_bare(name)} = nn.Parameter(...)` before accel.prepare_model(...), or "
            "a small nn.Module that holds it) and migrate again. Nothing in this "
            "file was migrated: a training setup is migrated whole or not at all "
            f"(sharding its data while the gradient of `{name}` is not averaged "
            "would train a different copy in each process)"
        )

    def _stepped_message(self, name: str, created: cst.CSTNode, stepped: str) -> str:
        return (
            f"`{name}` is a tensor this script trains outside any nn.Module "
            f"(`{snippet(created)}`, line {self._line(created)}; {stepped}). No "
            "data loader this file shards feeds it: every process would run the "
            f"same optimisation of `{name}`, and once migrated that optimizer is "
            "prepared (accel.prepare_optimizer), and the runtime refuses, at its "
            "first step, a tensor that belongs to no prepared model "
            "(UnpreparedParametersError). Where there is nothing to divide between "
            "processes (an image optimised by style transfer, a curve fitted to "
            "fixed points), run it as one process; otherwise make it an "
            "nn.Parameter of a module the script prepares (`model."
            f"{_bare(name)} = nn.Parameter(...)` before accel.prepare_model(...), "
            "or a small nn.Module that holds it) and migrate again. Nothing in this "
            "file was migrated: a training setup is migrated whole or not at all"
        )

    def _line(self, node: cst.CSTNode) -> int:
        return self.original_line(node)

    # -- the setup ------------------------------------------------------------------------
    @cached_property
    def _shards_data(self) -> bool:
        """A loader the runtime shards: without one every process reads the same
        data and computes the same gradient."""
        return any(
            self.index.qualnames(call.func) & DATALOADER_CALLS
            and unshardable_reason(self.index, call) is None
            for call in self.index.calls
        )

    @cached_property
    def _created(self) -> dict[Key, cst.BaseExpression]:
        """Variables bound, outside any loop and any module class, to a new tensor
        with a gradient of its own."""
        found: dict[Key, cst.BaseExpression] = {}
        for key, values in self.index.values.items():
            if key in found:
                continue
            attribute = key[1].startswith("self.")
            if attribute and not _plain_class(key[0]):
                continue  # a module's attribute: AM045's
            for value in values:
                if (
                    value is not None
                    and self._learnable(value)
                    and self._setup(value, attribute)
                ):
                    found[key] = value
                    break
        for call in self.index.calls:
            # `w = torch.randn(3, 1)` then `w.requires_grad_()` on its own line
            if not _is_method(call, "requires_grad_") or _false_arg(call):
                continue
            key = self.index.key(call.func.value)  # type: ignore[attr-defined]
            values = self.index.values.get(key, []) if key is not None else []
            if key is None or key in found or key[1].startswith("self."):
                continue
            if values and all(
                v is not None and self._torch_call(v) and self._setup(v) for v in values
            ):
                found[key] = values[0]  # type: ignore[assignment]
        return found

    def _learnable(self, value: cst.BaseExpression) -> bool:
        """``torch.f(..., requires_grad=True)`` (through ``.to(...)``...),
        ``<torch call>.requires_grad_()``, ``nn.Parameter(...)``."""
        while isinstance(value, cst.Call):
            names = self.index.qualnames(value.func)
            if names & _PARAMETER_CALLS:
                return True
            if any(n.startswith("torch.") for n in names) and any(
                a.keyword is not None
                and a.keyword.value == "requires_grad"
                and isinstance(a.value, cst.Name)
                and a.value.value == "True"
                for a in value.args
            ):
                return True
            if not isinstance(value.func, cst.Attribute):
                return False
            if value.func.attr.value == "requires_grad_" and not _false_arg(value):
                return self._torch_call(value.func.value)
            value = value.func.value
        return False

    def _torch_call(self, value: cst.BaseExpression) -> bool:
        while isinstance(value, cst.Call):
            if any(n.startswith("torch.") for n in self.index.qualnames(value.func)):
                return True
            if not isinstance(value.func, cst.Attribute):
                return False
            value = value.func.value
        return False

    def _setup(self, value: cst.BaseExpression, attribute: bool = False) -> bool:
        """Not in a loop (a per-step tensor is data) and not in a class's methods,
        but for an attribute of a plain class (``self.log_alpha = torch.zeros(1,
        requires_grad=True)`` in an agent's ``__init__``)."""
        for ancestor in self.index.ancestors(value):
            if isinstance(ancestor, (cst.For, cst.While, cst.CompFor)):
                return False
            if isinstance(ancestor, cst.FunctionDef):
                return attribute or self.index.enclosing_class(value) is None
        return not attribute

    @cached_property
    def _step_reads(self) -> set[Key]:
        """Variables read in a loop that reads a data loader and runs a backward."""
        found: set[Key] = set()
        loops: list[cst.For | cst.While] = [*self.index.for_loops]
        loops += findall(self.index.module, m.While())  # type: ignore[arg-type]
        for loop in loops:
            if self.index.reads_loader(loop) and self.index.runs_backward(loop.body):
                for name in findall(loop.body, m.Name()):
                    key = self.index.key(name)
                    if key is not None:
                        found.add(key)
        return found

    # -- how it is trained -------------------------------------------------------------------
    @cached_property
    def _local_optimizers(self) -> set[cst.ClassDef]:
        return local_optimizer_classes(self.index)

    def _optimizer_of(self, key: Key) -> str | None:
        for call in self._optimizer_calls(self._local_optimizers):
            if key in self._params_of(call):
                return (
                    f"stepped by the optimizer `{snippet(call)}`, line "
                    f"{self._line(call)}"
                )
        return None

    def _optimizer_calls(self, local: set[cst.ClassDef]) -> Iterator[cst.Call]:
        for call in self.index.calls:
            if (
                self.index.local_class(call.func) in local
                or any(is_optimizer_class(q) for q in self.index.qualnames(call.func))
                or looked_up_optimizer(self.index, call)
            ):
                yield call

    def _params_of(self, call: cst.Call) -> set[Key]:
        """The variables an optimizer's ``params`` argument is built from."""
        params = next(
            (
                a.value
                for a in call.args
                if a.keyword is None or a.keyword.value == "params"
            ),
            None,
        )
        found: set[Key] = set()
        if params is None:
            return found
        extra = self._extra
        todo: list[tuple[cst.CSTNode, int]] = [(params, 0)]
        while todo:
            node, depth = todo.pop()
            attributes = findall(node, m.Attribute(value=m.Name("self")))
            for name in [*variable_names(node), *attributes]:
                key = self.index.key(name)
                if key is None or key in found:
                    continue
                found.add(key)
                if depth < _DEPTH:
                    values = [*self.index.values.get(key, ()), *extra.get(key, ())]
                    values += self._passed_for(key)
                    todo += [(v, depth + 1) for v in values if v is not None]
        return found

    def _passed_for(self, key: Key) -> list[cst.BaseExpression]:
        """What the callers of a local function pass for its parameter ``key``
        (neural-style-pt's ``setup_optimizer(img)`` builds ``LBFGS([img])``)."""
        passed: list[cst.BaseExpression] = []
        for function in self._functions:
            if self.index.function_scope_key(function, key[1]) != key:
                continue
            for site in self.index.call_sites(function):
                passed += [arg for k, arg in self.index.arguments(site) if k == key]
        return passed

    @cached_property
    def _functions(self) -> list[cst.FunctionDef]:
        return findall(self.index.module, m.FunctionDef())  # type: ignore[return-value]

    @cached_property
    def _extra(self) -> dict[Key, list[cst.BaseExpression]]:
        return extra_values(self.index)

    def _hand_update_of(self, key: Key) -> str | None:
        for update in self._updates:
            target = _updated(update)
            if target is not None and self.index.key(target) == key:
                return (
                    f"updated by hand at line {self._line(update)}: `{snippet(update)}`"
                )
        for call in self.index.calls:
            target = self.index.callee(call)
            if target is None or not self._steps_by_grad(target[0]):
                continue
            for arg in call.args:
                items = (
                    [e.value for e in arg.value.elements]
                    if isinstance(arg.value, (cst.List, cst.Tuple))
                    else [arg.value]
                )
                if any(self.index.key(item) == key for item in items):
                    return (
                        f"updated by `{target[0].name.value}()` it is passed to at line "
                        f"{self._line(call)}, which steps its arguments by their .grad"
                    )
        return None

    @cached_property
    def _updates(self) -> list[cst.CSTNode]:
        """In-place updates whose new value is computed from a ``.grad``:
        ``w -= lr * w.grad``, ``w.data.sub_(lr * w.grad)``, ``w.data = ...``."""
        found: list[cst.CSTNode] = []
        for node in findall(self.index.module, m.AugAssign() | m.Assign()):
            if isinstance(node, cst.Assign) and not any(
                _is_data(t.target) for t in node.targets
            ):
                continue
            if _reads_grad(node.value):  # type: ignore[attr-defined]
                found.append(node)
        for call in self.index.calls:
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value.endswith("_")
                and func.attr.value not in _NOT_UPDATES
                and not _is_grad(func.value)
                and any(_reads_grad(a.value) for a in call.args)
            ):
                found.append(call)
        return found

    def _steps_by_grad(self, function: cst.FunctionDef) -> bool:
        return any(
            any(a is function.body for a in self.index.ancestors(u))
            for u in self._updates
        )


def _plain_class(scope: object) -> bool:
    """A class of no base but ``object``: an agent or a holder, never an nn.Module."""
    return isinstance(scope, cst.ClassDef) and all(
        isinstance(b.value, cst.Name) and b.value.value == "object" for b in scope.bases
    )


def _bare(name: str) -> str:
    return name.removeprefix("self.")


def _updated(update: cst.CSTNode) -> cst.BaseExpression | None:
    """The variable an update writes (``w`` of ``w -= ...``, ``w.data -= ...``,
    ``w.data.sub_(...)``)."""
    if isinstance(update, cst.AugAssign):
        target: cst.BaseExpression = update.target
    elif isinstance(update, cst.Assign):
        target = update.targets[0].target
    else:
        target = update.func.value  # type: ignore[attr-defined]
    if _is_data(target):
        target = target.value  # type: ignore[attr-defined]
    return target if isinstance(target, cst.Name) else None


def _is_method(call: cst.Call, name: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == name


def _false_arg(call: cst.Call) -> bool:
    return any(
        isinstance(a.value, cst.Name) and a.value.value == "False" for a in call.args
    )


def _is_data(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "data"


def _is_grad(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == "grad"


def _reads_grad(node: cst.CSTNode) -> bool:
    return bool(findall(node, m.Attribute(attr=m.Name("grad"))))
