"""AM013 autocast: torch's ``autocast(...)`` becomes ``accel.autocast(...)``.

## What
Rewrites ``torch.autocast(...)``, ``torch.amp.autocast(...)``,
``torch.cuda.amp.autocast(...)`` and ``torch.cpu.amp.autocast(...)`` (any import
spelling: ``from torch.cuda.amp import autocast``) where they are entered: as an
item of a ``with`` statement (alone or with other items) or as a decorator. The
``enabled=`` argument is kept (made a keyword when it was positional); the device
type, ``dtype`` and ``cache_enabled`` are dropped: the run's precision
(``--precision``) decides them. ``accel.autocast`` itself is left alone, so a
second run changes nothing.

## Why
After migration the runtime's precision plugin casts the model's forward, so a
script's own autocast would be a second one, with the script's device and dtype:
``torch.autocast("cuda", dtype=torch.float16)`` in a bf16 run mixes two
precisions, and on a CPU-only run it does nothing. ``accel.autocast`` is the
plugin's autocast for the code the script wraps (the loss), and does nothing in
an fp32 or FSDP run. It also checks the script's switch: ``enabled=False`` in an
fp16/bf16 run stops with an error that says so, ``enabled=True`` in an fp32 run
warns that ``--precision`` is missing.

## Example
```python
# before
with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.amp):
    loss = criterion(model(x), y)
# after
with accel.autocast(enabled=args.amp):
    loss = criterion(model(x), y)
```

## Fix safety
Safe where it is rewritten: the region is the same, in the run's precision
(AM012 reports which precision the script used). Left as it is and reported:

- ``autocast(enabled=False)`` (a literal ``False``): a region the script keeps in
  fp32 inside a mixed-precision one. It keeps working as torch's autocast (info).
- an autocast object that is stored or passed (``ctx = torch.autocast(...)``,
  entered later with ``with ctx:``), needs-review: ``accel.autocast(...)`` is a
  context manager for one ``with``, not an object to keep and enter again.
- a call with ``*args``/``**kwargs``, whose ``enabled=`` cannot be read.
"""

from __future__ import annotations

import libcst as cst

from ..amp import AUTOCAST, amp_api, bind, enabled_keyword, is_false
from ..rule import Rule


class Autocast(Rule):
    code = "AM013"
    name = "autocast"
    summary = "with torch.autocast(...) -> with accel.autocast(enabled=...)"

    def applies(self) -> bool:
        return self.originally_calls(AUTOCAST)  # all it reads is an autocast call

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        found = amp_api(self.index, original_node)
        if found is None or found[0] != "autocast":
            return updated_node
        params, _ = AUTOCAST[found[1]]
        bound = bind(original_node, params)
        if bound is None:
            self.report(
                original_node,
                "needs-review",
                "autocast(*args/**kwargs): cannot read its enabled= argument; left as it is",
            )
            return updated_node
        enabled = bound.get("enabled")
        if enabled is not None and is_false(original_node.args[enabled].value):
            self.report(
                original_node,
                "info",
                "autocast(enabled=False) keeps a region out of mixed precision; left as torch's autocast (accel.autocast(enabled=False) would stop an fp16/bf16 run)",
            )
            return updated_node
        if not self._entered_here(original_node):
            self.report(
                original_node,
                "needs-review",
                "an autocast object kept or passed rather than entered: accel.autocast(...) is for one `with` (or a decorator); write `with accel.autocast(...)` where it is entered",
            )
            return updated_node
        args = []
        if enabled is not None:
            args.append(enabled_keyword(updated_node.args[enabled]))
        dropped = [name for name in bound if name != "enabled"]
        detail = f" ({', '.join(dropped)} dropped)" if dropped else ""
        self.report(
            original_node,
            "fixed",
            f"autocast -> accel.autocast: the run's --precision decides the dtype{detail}",
        )
        return self.runtime_call("autocast", args)

    def _entered_here(self, node: cst.Call) -> bool:
        """An item of a ``with`` statement, or a decorator."""
        parent = self.parent(node)
        if isinstance(parent, cst.WithItem):
            return parent.item is node
        if isinstance(parent, cst.Decorator):
            return parent.decorator is node
        return False
