"""AM002 cuda-call: ``x.cuda()`` becomes ``x.to(accel.device())``.

## What
Rewrites every ``.cuda(...)`` call, on tensors and on modules, into
``.to(accel.device(), ...)``. A device index (``.cuda(0)``, ``.cuda(args.gpu)``,
``.cuda(device=1)``) is dropped; ``non_blocking=`` and ``memory_format=`` are kept.

## Why
``.cuda()`` means "the current GPU" and ``.cuda(0)`` means "the first GPU". Under
``accel-migrate launch`` every process has its own GPU, and on a machine without
one the script should still run on the CPU. ``accel.device()`` is right in both
cases.

## Example
```python
# before
data, target = data.cuda(), target.cuda(non_blocking=True)
model.cuda(args.gpu)
# after
data, target = data.to(accel.device()), target.to(accel.device(), non_blocking=True)
model.to(accel.device())
```

## Fix safety
Safe: for tensors and modules ``.to(device)`` does what ``.cuda()`` does, on the
process's own device. The explicit GPU index of a single-GPU script is dropped on
purpose; the process's local GPU replaces it.
"""

from __future__ import annotations

import libcst as cst

from ..rule import Rule, tidy_args

_KEPT_KEYWORDS = {"non_blocking", "memory_format"}


class CudaCall(Rule):
    code = "AM002"
    name = "cuda-call"
    summary = "x.cuda() / model.cuda(i) -> x.to(accel.device())"

    def applies(self) -> bool:
        # All it rewrites is an `x.cuda(...)` call; no rule writes one.
        return "cuda" in self.context.original_index.called_attributes

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        func = original_node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "cuda"):
            return updated_node
        if self.qualnames(func) & {"torch.cuda"}:
            return updated_node  # the torch.cuda module, not a method call
        kept = [
            arg
            for arg in updated_node.args
            if arg.keyword is not None and arg.keyword.value in _KEPT_KEYWORDS
        ]
        if any(arg.star for arg in original_node.args):
            self.report(
                original_node,
                "needs-review",
                "`.cuda(*args)`: cannot tell which argument is the device",
            )
            return updated_node
        updated_func = updated_node.func
        assert isinstance(updated_func, cst.Attribute)
        device = cst.Arg(value=self.runtime_call("device", []))
        self.report(original_node, "fixed", ".cuda() -> .to(accel.device())")
        return updated_node.with_changes(
            func=updated_func.with_changes(attr=cst.Name("to")),
            args=tidy_args(
                [
                    a.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    for a in (device, *kept)
                ]
            ),
        )
