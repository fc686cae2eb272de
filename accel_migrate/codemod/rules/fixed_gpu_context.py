"""AM023 fixed-gpu-context: the script pins its processes to one GPU.

## What
Reports, as needs-review, code that chooses a GPU for the whole process:

- ``with torch.cuda.device(0):`` (and any other ``torch.cuda.device(...)`` call),
  which makes that GPU the current one, unless it is given ``accel.device()``
  (directly, or through a variable only ever bound to it);
- ``os.environ["CUDA_VISIBLE_DEVICES"] = "0"`` and
  ``os.environ.setdefault("CUDA_VISIBLE_DEVICES", ...)``, which hide every other
  GPU from the process.

## Why
Under ``accel-migrate launch`` every process has its own GPU, which the runtime
makes current (``cuda:LOCAL_RANK``). A script that makes GPU 0 current puts
whatever it then creates on "the current GPU" back on GPU 0 in every process; a
script that sets ``CUDA_VISIBLE_DEVICES`` leaves each process one visible GPU,
and process 1 then finds no ``cuda:1`` at all. Launchers choose GPUs for the
processes they start; the script should not.

## Example
```python
# before
os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
with torch.cuda.device(args.gpu):
    train()
# after
# (unchanged: both reported as needs-review)
os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus
with torch.cuda.device(args.gpu):
    train()
```
Remove them, or set ``CUDA_VISIBLE_DEVICES`` for the whole job before
``accel-migrate launch`` instead.

## Fix safety
Nothing is rewritten: removing a ``with`` block's header or an environment setting
changes code around it that the codemod cannot judge (the block may do more than
choose the GPU; the variable may be read again).
"""

from __future__ import annotations

import libcst as cst

from ..patterns import string_value
from ..rule import Rule

_VISIBLE = "CUDA_VISIBLE_DEVICES"


class FixedGpuContext(Rule):
    code = "AM023"
    name = "fixed-gpu-context"
    summary = (
        "with torch.cuda.device(i) / CUDA_VISIBLE_DEVICES set by the script -> reported"
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.is_call_to(node, {"torch.cuda.device"}) and not self._own_gpu(node):
            self.report(
                node,
                "needs-review",
                "torch.cuda.device(...) makes one GPU current in every process; the "
                "runtime already makes each process's own GPU current: remove it",
                if_migrated=True,
            )
        elif (
            isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "setdefault"
            and "os.environ" in self.qualnames(node.func.value)
            and _names_visible(node)
        ):
            self._report_visible(node)

    def _own_gpu(self, call: cst.Call) -> bool:
        """``torch.cuda.device(accel.device())``, or of a variable only ever bound
        to it (AM001 rewrites ``device = torch.device("cuda")`` so): the process's
        own GPU, already the current one."""
        if not call.args:
            return False
        value = call.args[0].value
        if isinstance(value, cst.Name):
            found = self.plain_assignments(value)
            return found is not None and all(
                self.index.is_runtime_call(v, "device") for _, v in found
            )
        return self.index.is_runtime_call(value, "device")

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if self._environ_entry(target.target):
                self._report_visible(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self._environ_entry(node.target):
            self._report_visible(node)

    def _environ_entry(self, target: cst.BaseExpression) -> bool:
        """``os.environ["CUDA_VISIBLE_DEVICES"]``."""
        return (
            isinstance(target, cst.Subscript)
            and "os.environ" in self.qualnames(target.value)
            and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index)
            and string_value(target.slice[0].slice.value) == _VISIBLE
        )

    def _report_visible(self, node: cst.CSTNode) -> None:
        self.report(
            node,
            "needs-review",
            f"the script sets {_VISIBLE}: every process would see the same GPUs "
            "(and process 1 no cuda:1); set it for the whole job before "
            "accel-migrate launch instead",
            if_migrated=True,
        )


def _names_visible(call: cst.Call) -> bool:
    """``setdefault("CUDA_VISIBLE_DEVICES", ...)``, the key given by position, as
    ``key=`` or first in a ``*[...]`` literal."""
    for i, arg in enumerate(call.args):
        if arg.star:
            literal = arg.value
            return (
                arg.star == "*"
                and i == 0
                and isinstance(literal, (cst.List, cst.Tuple))
                and bool(literal.elements)
                and string_value(literal.elements[0].value) == _VISIBLE
            )
        if (arg.keyword is None and i == 0) or (
            arg.keyword is not None and arg.keyword.value == "key"
        ):
            return string_value(arg.value) == _VISIBLE
    return False
