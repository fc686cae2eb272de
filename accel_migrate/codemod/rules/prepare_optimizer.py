"""AM005 prepare-optimizer: optimizers are wrapped by ``accel.prepare_optimizer(...)``.

## What
Wraps the construction of every optimizer: classes of ``torch.optim`` (not the
learning-rate schedulers), of ``apex.optimizers``, ``bitsandbytes.optim``,
``timm.optim`` and ``transformers``, and classes of this file or of a local
module deriving from ``torch.optim.Optimizer`` or from one of those optimizer
classes, also through the project's own bases (``class MySGD(BaseSGD)`` with
``class BaseSGD(torch.optim.SGD)``; not a stand-in whose ``__init__`` never initialises
its base: ``class DummyOptimizer(torch.optim.Optimizer)`` with only
``self.param_groups = [{"lr": 0}]``, which steps nothing), also looked up by name (``OPTIMIZERS[args.opt](...)``
with a module-level dict of optimizer classes, ``getattr(torch.optim,
cfg.optimizer)(...)``, a local module's ``get_optimizer_class(name)(...)``). Works wherever the call is: an assignment,
``self.optimizer = ...``, or ``return optim.Adam(...)`` in a
``configure_optimizers`` method. The optimizer a local module's model class hands
back from a method over its own parameters (``optimizer =
model.configure_optimizers(config)``, ``GPT`` in mingpt/model.py, known from the
project view) is wrapped where that method is called, and so is the optimizer a
local module's factory function builds over the model or the parameters it is
handed (``build_optimizer(cfg, model)`` from a dict of optimizer classes by
name, with no-decay groups for norms and biases;
``make_optimizer(model.parameters(), args)``): that model is then trained, and prepared (AM004).

## Why
The runtime needs to know the optimizers: under FSDP their parameters are
replaced by sharded ones when the model is sharded, and under fp16 their ``step``
goes through the gradient scaler (skipped on inf/NaN gradients).

## Example
```python
# before
optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
# after
optimizer = accel.prepare_optimizer(optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
```

## Fix safety
Safe: ``prepare_optimizer`` returns the same optimizer object (schedulers,
``isinstance`` checks and ``state_dict()`` are unaffected). With one process and
fp32 it does nothing at all.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..helper_effects import optimizer_method
from ..names import is_optimizer_class
from ..optimizer_helpers import factory_model, factory_of
from ..optimizer_lookups import looked_up_optimizer
from ..optimizer_stand_ins import stand_in_optimizers
from ..optimizer_subclasses import local_optimizer_classes
from ..rule import Rule


class PrepareOptimizer(Rule):
    code = "AM005"
    name = "prepare-optimizer"
    summary = "optim.SGD(...) -> accel.prepare_optimizer(optim.SGD(...))"
    prepares = True

    @cached_property
    def optimizer_classes(self) -> set[cst.ClassDef]:
        # a stand-in that never initialises its Optimizer base (a validation
        # epoch's DummyOptimizer) holds no parameters: left alone
        local = local_optimizer_classes(self.index)
        return local - stand_in_optimizers(self.index, local)

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        local = self.index.local_class(original_node.func)
        helper = self.index.helper(original_node.func)
        is_optimizer = (
            local in self.optimizer_classes
            or (helper is not None and helper.optimizer_subclass)
            or any(is_optimizer_class(q) for q in self.qualnames(original_node.func))
            or looked_up_optimizer(self.index, original_node)
        )
        method = None if is_optimizer else optimizer_method(self.index, original_node)
        # a local module's factory, over a model this file names (AM004
        # prepares it: optimized_models)
        factory = (
            factory_of(self.index, original_node)
            if not is_optimizer
            and method is None
            and factory_model(self.index, original_node) is not None
            else None
        )
        if (not is_optimizer and method is None and factory is None) or (
            self._already_prepared(original_node)
        ):
            return updated_node
        if factory is not None:
            self.report(
                original_node,
                "fixed",
                f"`{factory.name}` in {factory.file} returns an optimizer it builds "
                f"over the `{factory.optimizer_over[0]}` it is handed -> "
                "accel.prepare_optimizer(...)",
            )
            return self.runtime_call("prepare_optimizer", [cst.Arg(value=updated_node)])
        if method is not None:
            name = original_node.func.attr.value  # type: ignore[attr-defined]
            self.report(
                original_node,
                "fixed",
                f"`{method.name}.{name}` in {method.file} returns an optimizer over "
                "the model's own parameters -> accel.prepare_optimizer(...)",
            )
            return self.runtime_call("prepare_optimizer", [cst.Arg(value=updated_node)])
        self.report(original_node, "fixed", "optimizer -> accel.prepare_optimizer(...)")
        return self.runtime_call("prepare_optimizer", [cst.Arg(value=updated_node)])

    def _already_prepared(self, node: cst.Call) -> bool:
        arg = self.parent(node)
        return isinstance(arg, cst.Arg) and self.index.is_runtime_call(
            self.parent(arg), "prepare_optimizer"
        )
