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
process; only the write is the main process's. When the script loads the same
file again further down, ``accel.barrier()`` follows the save so that no process
reads it before it is written (needs-review where only some processes reach the
save). A save into an in-memory buffer (``io.BytesIO``) is left as it is: each
process has its own buffer and reads it back.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m
from libcst.metadata import PositionProvider

from ..rule import Rule

_SAVE = {"torch.save", "torch.serialization.save"}
_LOAD = {"torch.load", "torch.serialization.load"}


class TorchSave(Rule):
    code = "AM010"
    name = "torch-save"
    summary = "torch.save(obj, path) -> accel.save(obj, path) (main process, atomic)"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self.is_call_to(original_node, _SAVE):
            return updated_node
        target = _target(original_node)
        if target is not None and self._in_memory(target):
            return updated_node  # every process writes its own buffer: nothing shared
        self.report(
            original_node, "fixed", "torch.save -> accel.save (main process, atomic)"
        )
        return updated_node.with_changes(func=self.runtime_attr("save"))

    @cached_property
    def read_back(self) -> set[cst.Call]:
        """Saves to a file that the script loads again further down: every process
        reads it, so they must wait until the main process has written it."""
        loads = [
            (self.get_metadata(PositionProvider, call).start.line, path)
            for call in self.index.calls
            if self.is_call_to(call, _LOAD) and (path := _argument(call, 0, "f"))
        ]
        found = set()
        for call in self.index.calls:
            if not self.is_call_to(call, _SAVE):
                continue
            target = _target(call)
            if target is None or self._in_memory(target):
                continue
            line = self.get_metadata(PositionProvider, call).start.line
            if any(
                later > line and self._same_file(target, path) for later, path in loads
            ):
                found.add(call)
        return found

    def _same_file(self, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
        code = cst.Module([]).code_for_node
        if code(a) != code(b):
            return False
        return not isinstance(a, cst.Name) or self.index.key(a) == self.index.key(b)

    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        saves = [c for c in m.findall(original_node, m.Call()) if c in self.read_back]
        if not saves:
            return updated_node
        if not self.index.uniform(original_node):
            self.report(
                saves[0],
                "needs-review",
                "the file is loaded again later, but saved where only some processes go: the others may read it before the main process has written it",
            )
            return updated_node
        self.report(
            saves[0],
            "fixed",
            "the file is loaded again later -> accel.barrier() after the save, so that no process reads it before it is written",
        )
        barrier = cst.SimpleStatementLine(
            body=[cst.Expr(self.runtime_call("barrier", []))]
        )
        return cst.FlattenSentinel([updated_node, barrier])

    def _in_memory(self, expr: cst.BaseExpression) -> bool:
        """``io.BytesIO()``, or a variable that only ever holds one."""
        if isinstance(expr, cst.Call):
            return bool(self.qualnames(expr.func) & _BUFFERS)
        key = self.index.key(expr)
        values = self.index.values.get(key, []) if key is not None else []
        return bool(values) and all(
            isinstance(v, cst.Call) and self.qualnames(v.func) & _BUFFERS
            for v in values
        )


_BUFFERS = {"io.BytesIO", "_io.BytesIO"}


def _target(call: cst.Call) -> cst.BaseExpression | None:
    """The ``f`` argument of ``torch.save(obj, f, ...)``."""
    return _argument(call, 1, "f")


def _argument(call: cst.Call, position: int, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position].value if len(positional) > position else None
