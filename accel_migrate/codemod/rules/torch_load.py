"""AM024 torch-load: ``torch.load(f)`` without ``map_location`` becomes ``accel.load(f)``.

## What
Rewrites calls of ``torch.load`` (any import spelling) that give no
``map_location`` into ``accel.load`` with the same arguments. A call that gives
one, by keyword or as the second argument, is left as it is: it is the user's
choice of device.

## Why
A checkpoint remembers the device each tensor was saved from, usually GPU 0. A
plain ``torch.load`` puts them back there, in every process: N processes
crowd GPU 0 with copies (or run out of its memory), and a CPU-only process
cannot load the file at all. ``accel.load`` maps tensors saved on a GPU to the
process's own device and keeps CPU tensors on the CPU. It never moves
everything to one device: a CPU RNG state in the checkpoint must stay a CPU
tensor for ``torch.set_rng_state``.

## Example
```python
# before
checkpoint = torch.load(args.resume)
# after
checkpoint = accel.load(args.resume)
```

## Fix safety
Safe: the same objects with the same values; only where GPU tensors land
differs, and with one GPU that is where the original put them. Other arguments
(``weights_only``, ``mmap``...) are passed on unchanged.
"""

from __future__ import annotations

import libcst as cst

from ..rule import Rule

_LOAD = {"torch.load", "torch.serialization.load"}


class TorchLoad(Rule):
    code = "AM024"
    name = "torch-load"
    summary = (
        "torch.load(f) without map_location -> accel.load(f) (each process's own GPU)"
    )

    def applies(self) -> bool:
        return self.originally_calls(_LOAD)  # all it rewrites is a torch.load

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self.is_call_to(original_node, _LOAD):
            return updated_node
        if _gives_map_location(original_node):
            return updated_node
        self.report(
            original_node,
            "fixed",
            "torch.load without map_location -> accel.load (GPU tensors on each process's own device, CPU tensors on the CPU)",
        )
        return updated_node.with_changes(func=self.runtime_attr("load"))


def _gives_map_location(call: cst.Call) -> bool:
    """A ``map_location`` by keyword or position, or arguments that may hold one."""
    positional = 0
    for arg in call.args:
        if arg.star:  # *args / **kwargs: cannot tell
            return True
        if arg.keyword is None:
            positional += 1
        elif arg.keyword.value == "map_location":
            return True
    return positional >= 2
