"""AM010 torch-save: ``torch.save(obj, path)`` becomes ``accel.save(obj, path)``.

## What
Rewrites calls of ``torch.save`` (any import spelling) into ``accel.save`` with
the same arguments.

## Why
Every process runs the script, so every process would write the same file at
the same time: at best N times the work, at worst a corrupt file. ``accel.save``
writes on the main process only, atomically (a temporary file in the same folder,
then a rename), so a crash never leaves a truncated checkpoint.

## Example
```python
# before
torch.save(model.state_dict(), "mnist_cnn.pt")
# after
accel.save(accel.state_dict(model), "mnist_cnn.pt")   # with AM011
```

## Fix safety
Safe: the file has the same content as the original script's. Gathering a
sharded (FSDP) state dict is a collective, so the object is still built on every
process; only the write is the main process's.
"""

from __future__ import annotations

import libcst as cst

from ..rule import Rule


class TorchSave(Rule):
    code = "AM010"
    name = "torch-save"
    summary = "torch.save(obj, path) -> accel.save(obj, path) (main process, atomic)"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self.is_call_to(
            original_node, {"torch.save", "torch.serialization.save"}
        ):
            return updated_node
        self.report(
            original_node, "fixed", "torch.save -> accel.save (main process, atomic)"
        )
        return updated_node.with_changes(func=self.runtime_attr("save"))
