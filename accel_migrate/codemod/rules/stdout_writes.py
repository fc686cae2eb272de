"""AM035 stdout-writes: writes to ``sys.stdout`` run on the main process.

## What
- ``sys.stdout.write(...)`` and ``sys.stdout.flush()``, made as statements,
  become ``accel.on_main_process(sys.stdout.write, ...)``: the pytorch-cifar
  ``progress_bar`` shape, which writes its bar piece by piece.
- ``sys.stdout`` kept on an object (``self.console = sys.stdout``, the re-id
  ``Logger`` that writes every message to the console and to a file) becomes
  ``accel.on_main_process(lambda: sys.stdout)``: the stream on the main
  process, and elsewhere a stand-in that accepts every call and does nothing.
  A name that saves the stream to put it back (``saved = sys.stdout``) is left
  as it is.

Writes in ``except`` blocks and to ``sys.stderr`` stay on every process, as
AM008 leaves such prints: errors should show from whichever process has them.

## Why
Every process runs the script: each writes its own copy of every line, with
its own share's numbers, interleaved with the others. The original wrote one.

## Example
```python
# before
sys.stdout.write(" %d/%d | %s\\n" % (current + 1, total, msg))
self.console = sys.stdout
# after
accel.on_main_process(sys.stdout.write, " %d/%d | %s\\n" % (current + 1, total, msg))
self.console = accel.on_main_process(lambda: sys.stdout)
```

## Fix safety
Safe for output that only the user reads. The arguments are still evaluated on
every process, so a collective in them (``accel.reduce``) is still reached by
each. A write whose result is used (``n = sys.stdout.write(s)``) is left as it
is. The stand-in is true and accepts any call, so code that only writes to the
kept stream keeps working on every process; code that reads from it
(``self.console.encoding``) gets the stand-in too.
"""

from __future__ import annotations

import libcst as cst

from ..rule import Rule

_CALLS = frozenset({"sys.stdout.write", "sys.stdout.flush"})
_STREAM = frozenset({"sys.stdout"})


class StdoutWrites(Rule):
    code = "AM035"
    name = "stdout-writes"
    summary = "sys.stdout.write(s) -> accel.on_main_process(sys.stdout.write, s); console = sys.stdout -> main process only"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self.is_call_to(original_node, _CALLS):
            return updated_node
        if not isinstance(self.parent(original_node), cst.Expr) or self.index.in_except(
            original_node
        ):
            return updated_node
        self.report(
            original_node,
            "fixed",
            "sys.stdout write -> accel.on_main_process(...) (main process only)",
        )
        return self.on_main_process(updated_node)

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign:
        value = original_node.value
        if not (
            isinstance(value, cst.Attribute)
            and self.qualnames(value) & _STREAM
            # kept on an object (a Logger's console), not saved to be put back
            # (``saved = sys.stdout`` ... ``sys.stdout = saved``)
            and all(isinstance(t.target, cst.Attribute) for t in original_node.targets)
            and not self.index.in_except(original_node)
        ):
            return updated_node
        self.report(
            value,
            "fixed",
            "sys.stdout kept as a value -> accel.on_main_process(lambda: sys.stdout) "
            "(the stream on the main process, a stand-in that writes nothing elsewhere)",
        )
        stream = cst.Lambda(params=cst.Parameters(), body=updated_node.value)
        return updated_node.with_changes(
            value=self.runtime_call("on_main_process", [cst.Arg(stream)])
        )
