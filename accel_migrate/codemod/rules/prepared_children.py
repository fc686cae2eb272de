"""AM043 prepared-children: a prepared model's children are the user's module's.

## What
On a variable that holds a prepared model (AM004), ``model.children()`` and
``model.named_children()`` become ``accel.unwrap(model).children()`` and
``accel.unwrap(model).named_children()``: the layers of the user's module, as
in the original script.

## Why
``accel.prepare_model`` hands back a wrapper module whose only child is the
user's module. The common surgery that drops a model's head,
``nn.Sequential(*list(model.children())[:-1])`` (PyTorch-BYOL's linear
evaluation taking the encoder out of its ResNet18), would then drop the whole
model and keep nothing: the "encoder" becomes an empty ``nn.Sequential`` that
hands back its input, and every feature, and every number computed from them,
is wrong, with no error.

## Example
```python
# before
encoder = ResNet18(**config["network"])
encoder.load_state_dict(state)
encoder = torch.nn.Sequential(*list(encoder.children())[:-1])
# after
encoder = accel.prepare_model(ResNet18(**config["network"]))
accel.load_state_dict(encoder, state)
encoder = torch.nn.Sequential(*list(accel.unwrap(encoder).children())[:-1])
```

## Fix safety
Safe: ``accel.unwrap`` returns the user's module, whose children are the
original's; on one process a prepared model is the module itself. A model
built from those children is a new module: where it is trained, AM004
prepares it where it is built.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..analysis import Key
from ..patterns import prepared_models
from ..rule import Rule

_CHILDREN = frozenset({"children", "named_children"})


class PreparedChildren(Rule):
    code = "AM043"
    name = "prepared-children"
    summary = "model.children() of a prepared model -> accel.unwrap(model).children()"

    @cached_property
    def models(self) -> frozenset[Key]:
        return prepared_models(self.index)

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        func = original_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _CHILDREN):
            return updated_node
        if self.index.is_runtime_call(func.value, "unwrap"):
            return updated_node  # a second run
        if not self.index.holds_tagged(func.value, self.models):
            return updated_node
        updated_func = updated_node.func
        assert isinstance(updated_func, cst.Attribute)
        name = func.attr.value
        self.report(
            original_node,
            "fixed",
            f"model.{name}() of a prepared model -> accel.unwrap(model).{name}() "
            "(the layers of the user's module, not the wrapper's one child)",
        )
        unwrapped = self.runtime_call("unwrap", [cst.Arg(value=updated_func.value)])
        return updated_node.with_changes(
            func=updated_func.with_changes(value=unwrapped)
        )
