"""AM036 library-writes: writes of a batch's helper module that no barrier can follow are reported.

## What
Runs on a helper module of a batch that is migrated for its callers (AM102:
``save_snapshot`` returning its path, a ``Logger`` class, ``evaluate(model,
loader)``), where AM010 and AM017 put saves, removals, copies and files opened
for writing on the main process only. It reports, as needs-review, such a write:

- in a method of a class other than ``__init__`` (``CheckpointManager.save``),
  where the batch uses the class: the callers' calls of an instance's methods
  are not followed, so no ``accel.barrier()`` can be placed after them, and a
  process may read the files before the main process has written them;
- followed in the same function (or in a loop around it) by a look at the file
  system, itself or through a function of the module it calls (``glob.glob``, ``os.listdir``, ``os.path.exists``, ``open`` for
  reading, ``torch.load``...): on the other processes that read runs before the
  main process has written, and they see other files than the original did
  (a ``save`` that globs the folder to return the snapshots it kept).

A finding leaves the module unchanged, and its importers too (AM103).

## Why
The original wrote and then read on one process, in that order. Migrated, the
main process writes and every process reads: without a barrier between them,
what each reads depends on timing, and a value computed from it (the newest
snapshot, a list of kept files) can differ between processes, which then train
on different states with no error.

## Example
```python
# before
class CheckpointManager:                         # checkpoints.py, migrated for
    def save(self, epoch, model):                # train.py's calls of it
        torch.save(model.state_dict(), path)
        return sorted(glob.glob("ckpt/*.pt"))
# after
class CheckpointManager:                         # left unchanged, and train.py
    def save(self, epoch, model):                # too (AM103): AM036 reports the
        torch.save(model.state_dict(), path)     # write in a method, read back
        return sorted(glob.glob("ckpt/*.pt"))    # by glob.glob
```

## Fix safety
Report only: the module is left unchanged, and so are its importers (AM103).
"""

from __future__ import annotations

import re
from functools import cached_property

import libcst as cst
from libcst.metadata import PositionProvider

from ..file_changes import PATH_CHANGERS, PATH_WRITERS
from ..file_reads import looks_at_files, loops
from ..names import FILE_CHANGERS, SAVES
from ..rule import Rule
from ..save_calls import OPEN_CALLS, write_mode


class LibraryWrites(Rule):
    code = "AM036"
    name = "library-writes"
    summary = (
        "a helper module's write in a method, or read back in its function -> reported"
    )
    # before AM010 and AM017 rewrite the writes, so that findings point at them
    # as written (a second run, over a migrated module, sees what they made)
    phase = 40

    def applies(self) -> bool:
        # Only a helper module migrated for its callers (its one hook's test).
        project = self.context.project
        return project is not None and bool(project.library_for)

    def visit_Call(self, node: cst.Call) -> None:
        if not self.index.project.library_for or not self._writes_through(node):
            return
        function = self.index.enclosing_function(node)
        if function is None:
            return  # at import: every process imports before it calls anything
        owner = self.index.enclosing_class(node)
        name = function.name.value
        if owner is not None and name != "__init__" and self._used(owner):
            self.block(
                node,
                f"`{owner.name.value}.{name}` writes files, on the main process only "
                "once migrated; the batch's calls of an instance's methods are not "
                "followed, so no accel.barrier() can follow them, and a process may "
                "read these files before the main process has written them; move "
                "the write to a function the callers call, or migrate by hand",
            )
            return
        look = self._look_after(node, function)
        if look is not None:
            self.block(
                node,
                f"`{name}` writes files on the main process only once migrated, and "
                f"then looks at the file system (`{look}`): on the other processes "
                "that runs before the main process has written, so what they find "
                "differs from what the original found; put accel.barrier() between "
                "them where every process passes, or migrate by hand",
            )

    def _writes(self, call: cst.Call) -> bool:
        """A write AM010 or AM017 puts on the main process only, or has put
        there (``accel.save``, ``accel.on_main_process(os.remove, ...)``)."""
        writers = SAVES | PATH_WRITERS.keys() | FILE_CHANGERS.keys()
        if self.is_call_to(call, writers) or self.index.is_runtime_call(call, "save"):
            return True
        if self.index.is_runtime_call(call, "on_main_process") and call.args:
            placed = call.args[0].value
            return bool(self.qualnames(placed) & (writers | OPEN_CALLS))
        if self.is_call_to(call, OPEN_CALLS) and write_mode(call) is not None:
            return True
        func = call.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value in PATH_CHANGERS
            and isinstance(self.parent(call), cst.Expr)
        )

    def _used(self, owner: cst.ClassDef) -> bool:
        """Does the batch call the class, or the module name it anywhere else?"""
        name = owner.name.value
        if any(
            called.split(".")[0] == name for called, _ in self.index.project.callers
        ):
            return True
        uses = re.findall(rf"\b{re.escape(name)}\b", self.context.original_code)
        return len(uses) > 1

    def _writes_through(self, call: cst.Call) -> bool:
        """A write, or a call of a function of the module that writes."""
        callee = self.index.local_function(call.func)
        return self._writes(call) or (
            callee is not None and self._reach.get(callee, (False, False))[0]
        )

    def _looks_through(self, call: cst.Call) -> bool:
        callee = self.index.local_function(call.func)
        return call in self._looks or (
            callee is not None and self._reach.get(callee, (False, False))[1]
        )

    @cached_property
    def _reach(self) -> dict[cst.FunctionDef, tuple[bool, bool]]:
        """Each function of the module: does it write, does it look at the file
        system, itself or through the module's functions it calls?"""
        calls: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.index.calls:
            function = self.index.enclosing_function(call)
            if function is not None:
                calls.setdefault(function, []).append(call)
        reach = {
            function: (
                any(self._writes(c) for c in own),
                any(c in self._looks for c in own),
            )
            for function, own in calls.items()
        }
        changed = True
        while changed:
            changed = False
            for function, own in calls.items():
                writes, looks = reach[function]
                for call in own:
                    callee = self.index.local_function(call.func)
                    if callee is None or callee not in reach:
                        continue
                    writes = writes or reach[callee][0]
                    looks = looks or reach[callee][1]
                if (writes, looks) != reach[function]:
                    reach[function] = (writes, looks)
                    changed = True
        return reach

    def _look_after(self, write: cst.Call, function: cst.FunctionDef) -> str | None:
        line = self._line(write)
        around = loops(self.index, write)
        for call in self.index.calls:
            if self.index.enclosing_function(
                call
            ) is not function or not self._looks_through(call):
                continue
            if self._line(call) > line or loops(self.index, call) & around:
                return cst.Module([]).code_for_node(call.func)
        return None

    @cached_property
    def _looks(self) -> frozenset[cst.Call]:
        return frozenset(c for c in self.index.calls if looks_at_files(self, c))

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line
