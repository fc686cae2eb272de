"""AM011 model-state-dict: a prepared model's state dict goes through the runtime.

## What
On a variable that holds a prepared model (AM004), ``model.state_dict()`` becomes
``accel.state_dict(model)`` and ``model.load_state_dict(sd, ...)`` becomes
``accel.load_state_dict(model, sd, ...)``. The model is followed into functions
and ``self`` attributes that receive it.

## Why
Checkpoints must have exactly the keys of the original script's, so that they
load into the original model class, and they must be whole: under FSDP each
process holds a shard, and ``accel.state_dict`` gathers the full state dict
(``accel.load_state_dict`` scatters a full one back into the shards).

## Example
```python
# before
torch.save(model.state_dict(), "mnist_cnn.pt")
model.load_state_dict(torch.load("mnist_cnn.pt"))
# after
accel.save(accel.state_dict(model), "mnist_cnn.pt")
accel.load_state_dict(model, torch.load("mnist_cnn.pt"))
```

## Fix safety
Safe: the same keys and values as the original script. Under FSDP gathering is a
collective; the call stays where the original had it, which every process
reaches in the same order as long as the surrounding code does not depend on the
process's own data (AM008 explains the check). Where it does, the rewrite is
still made and reported as needs-review.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..analysis import Key
from ..file_tests import collective_note
from ..patterns import prepared_models
from ..rule import Rule


class ModelStateDict(Rule):
    code = "AM011"
    name = "model-state-dict"
    summary = "model.state_dict() -> accel.state_dict(model) on prepared models"

    @cached_property
    def models(self) -> frozenset[Key]:
        return prepared_models(self.index)

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        func = original_node.func
        if not (
            isinstance(func, cst.Attribute)
            and func.attr.value in {"state_dict", "load_state_dict"}
        ):
            return updated_node
        if not self.index.holds_tagged(func.value, self.models):
            return updated_node
        if func.attr.value == "state_dict" and original_node.args:
            return updated_node  # destination/prefix arguments: a module-internal call
        updated_func = updated_node.func
        assert isinstance(updated_func, cst.Attribute)
        name = func.attr.value
        if not self.index.uniform(original_node):
            self.report(
                original_node,
                "needs-review",
                f"model.{name}() where only some processes go: under FSDP it is a collective and the others never join it"
                + collective_note(self, original_node),
                if_migrated=True,
            )
        self.report(original_node, "fixed", f"model.{name}() -> accel.{name}(model)")
        return self.runtime_call(
            name, [cst.Arg(value=updated_func.value), *updated_node.args]
        )
