"""AM015 clip-grad: gradient clipping of a prepared model goes through the runtime.

## What
Rewrites ``torch.nn.utils.clip_grad_norm_(params, max_norm, ...)`` into
``accel.clip_grad_norm_(params, max_norm, ...)`` and ``clip_grad_value_`` into
``accel.clip_grad_value_`` (any import spelling; the deprecated
``clip_grad_norm`` too) when the parameters are those of a prepared model (AM004):
``model.parameters()``, ``self.model.encoder.parameters()``, a list or
comprehension built from them, a variable or function argument holding one, or
parameters taken from a prepared optimizer (``optimizer.param_groups``,
``group["params"]`` in a loop over them). ``norm_type`` is kept; ``foreach=``
(which only picks the implementation) is dropped.

## Why
``torch.nn.utils.clip_grad_norm_`` sees what this process holds. Under FSDP that
is a shard of every gradient, so the norm is the shard's and every process clips
by a different factor; ``accel.clip_grad_norm_`` returns, and clips by, the
global norm. Under ``--precision fp16`` the gradients are still multiplied by the
loss scale when the script clips them (the runtime unscales in the optimizer's
step); the runtime's clip unscales them first, once, as ``scaler.unscale_`` does.

## Example
```python
# before
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
optimizer.step()
# after
accel.backward(loss)
accel.clip_grad_norm_(model.parameters(), max_norm=1.0)
optimizer.step()
```

## Fix safety
Safe: with one process in fp32 (and under DDP, where every process holds the same
averaged gradients) it is the same call. Clipping parameters that the rule cannot
trace to a prepared model or optimizer is left as it is and reported as
needs-review, and so is ``error_if_nonfinite=True`` (the runtime's clip has no such
argument). Under FSDP the norm is a collective; a clip where only some processes
go is still rewritten but reported as needs-review (AM008 explains the check).
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..amp import bind, code, is_false
from ..analysis import Key, variable_names
from ..file_tests import collective_note
from ..patterns import prepared_models
from ..rule import Rule, tidy_args
from ..scopes import ScopeProvider
from ..subtrees import findall

_CLIPS = {
    "torch.nn.utils.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_norm_": "clip_grad_norm_",
    "torch.nn.utils.clip_grad_norm": "clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_norm": "clip_grad_norm_",
    "torch.nn.utils.clip_grad_value_": "clip_grad_value_",
    "torch.nn.utils.clip_grad.clip_grad_value_": "clip_grad_value_",
}
_SIGNATURES = {
    "clip_grad_norm_": (
        "parameters",
        "max_norm",
        "norm_type",
        "error_if_nonfinite",
        "foreach",
    ),
    "clip_grad_value_": ("parameters", "clip_value", "foreach"),
}
_DROPPED = {"foreach", "error_if_nonfinite"}
_MAX_DEPTH = 4


class ClipGrad(Rule):
    code = "AM015"
    name = "clip-grad"
    summary = "clip_grad_norm_(model.parameters(), 1.0) -> accel.clip_grad_norm_(model.parameters(), 1.0)"

    @cached_property
    def models(self) -> frozenset[Key]:
        return prepared_models(self.index)

    @cached_property
    def optimizers(self) -> set[Key]:
        return self.index.tagged(
            lambda e: self.index.is_runtime_call(e, "prepare_optimizer")
        )

    @cached_property
    def parameter_variables(self) -> set[Key]:
        """Variables and function parameters that may hold a prepared model's
        parameters (followed through calls to this file's functions)."""
        return self.index.tagged(lambda e: self._prepared(e, follow_parameters=False))

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        name = self._clip(original_node)
        if name is None:
            return updated_node
        bound = bind(original_node, _SIGNATURES[name])
        if bound is None or "parameters" not in bound:
            self.report(
                original_node,
                "needs-review",
                f"{name}(*args/**kwargs): cannot tell which argument holds the parameters; left as it is",
            )
            return updated_node
        strict = bound.get("error_if_nonfinite")
        if strict is not None and not is_false(original_node.args[strict].value):
            self.report(
                original_node,
                "needs-review",
                "clip_grad_norm_(error_if_nonfinite=...): accel.clip_grad_norm_ has no such argument; left as it is",
            )
            return updated_node
        parameters = original_node.args[bound["parameters"]].value
        if not self._prepared(parameters):
            self.report(
                original_node,
                "needs-review",
                f"{name}(`{_short(parameters)}`): not shown to be a prepared model's parameters, left as it is; under FSDP the norm would be this process's shard only, and under fp16 the gradients would still be scaled",
                if_migrated=True,
            )
            return updated_node
        if not self.index.uniform(original_node):
            self.report(
                original_node,
                "needs-review",
                f"{name}() where only some processes go: under FSDP the norm is a collective and the others never join it"
                + collective_note(self, original_node),
                if_migrated=True,
            )
        dropped = {bound[n] for n in _DROPPED if n in bound}
        args = [a for i, a in enumerate(updated_node.args) if i not in dropped]
        if args and dropped and max(dropped) == len(updated_node.args) - 1:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        why = (
            "fp16 gradients unscaled first; the global norm under FSDP"
            if name == "clip_grad_norm_"
            else "fp16 gradients unscaled first"
        )
        self.report(original_node, "fixed", f"{name} -> accel.{name} ({why})")
        return updated_node.with_changes(
            func=self.runtime_attr(name), args=tidy_args(args)
        )

    def _clip(self, call: cst.Call) -> str | None:
        for qualname in self.qualnames(call.func):
            if qualname in _CLIPS:
                return _CLIPS[qualname]
        return None

    # -- where do the parameters come from -------------------------------------------------
    def _prepared(
        self, expr: cst.BaseExpression, follow_parameters: bool = True, depth: int = 0
    ) -> bool:
        """Are the tensors of ``expr`` all a prepared model's (or a prepared
        optimizer's)? At least one source must be found, and none may be unknown."""
        verdicts = self._sources(expr, follow_parameters, depth)
        return bool(verdicts) and all(verdicts)

    def _sources(
        self, expr: cst.BaseExpression, follow_parameters: bool, depth: int
    ) -> list[bool]:
        if depth > _MAX_DEPTH:
            return [False]
        verdicts: list[bool] = []
        skip: set[cst.Name] = set()
        for call in findall(expr, m.Call(func=m.Attribute(attr=m.Name("parameters")))):
            receiver = call.func.value  # type: ignore[attr-defined]
            verdicts.append(self._holds(receiver, self.models, "prepare_model"))
            skip.update(variable_names(receiver))
        for attribute in findall(expr, m.Attribute(attr=m.Name("param_groups"))):
            receiver = attribute.value  # type: ignore[attr-defined]
            verdicts.append(self._holds(receiver, self.optimizers, "prepare_optimizer"))
            skip.update(variable_names(receiver))
        for name in variable_names(expr):
            if name in skip:
                continue
            verdicts.extend(self._variable(name, follow_parameters, depth))
        return verdicts

    def _holds(self, receiver: cst.BaseExpression, keys: set[Key], call: str) -> bool:
        if self.index.is_runtime_call(receiver, call):
            return True
        key = self.index.root_key(receiver)
        return key is not None and key in keys

    def _variable(
        self, name: cst.Name, follow_parameters: bool, depth: int
    ) -> list[bool]:
        """What a name in the parameters expression contributes: nothing for modules,
        functions and comprehension variables; the sources of its values otherwise."""
        scope = self.get_metadata(ScopeProvider, name, None)
        if scope is None:
            return []
        assignments = [a for a in scope[name.value] if hasattr(a, "node")]
        verdicts: list[bool] = []
        for assignment in assignments:
            node = assignment.node
            if isinstance(
                node, (cst.Import, cst.ImportFrom, cst.FunctionDef, cst.ClassDef)
            ):
                continue
            if isinstance(node, cst.Param):
                key = self.index.key(name)
                verdicts.append(follow_parameters and key in self.parameter_variables)
                continue
            binding = self._binding(node)
            if isinstance(binding, cst.CompFor):
                continue  # bound to the items of an iterable inside the expression
            if isinstance(binding, cst.For):
                verdicts.extend(
                    self._sources(binding.iter, follow_parameters, depth + 1)
                )
                continue
            key = self.index.key(name)
            values = self.index.values.get(key, []) if key is not None else []
            if not values or any(v is None for v in values):
                verdicts.append(False)
                continue
            for value in values:
                assert value is not None
                verdicts.extend(self._sources(value, follow_parameters, depth + 1))
        return verdicts

    def _binding(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The ``for`` or comprehension whose target binds ``node``, if one does."""
        child: cst.CSTNode = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.CompFor)):
                return ancestor if ancestor.target is child else None
            if not isinstance(ancestor, (cst.Tuple, cst.List, cst.Element)):
                return None
            child = ancestor
        return None


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(code(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
