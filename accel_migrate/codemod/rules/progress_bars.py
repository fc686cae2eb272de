"""AM016 progress-bars: tqdm progress bars show on the main process only.

## What
Adds ``disable=not accel.is_main_process()`` to every ``tqdm(...)`` and
``trange(...)`` call, whatever the spelling (``from tqdm import tqdm``,
``import tqdm; tqdm.tqdm(...)``, ``tqdm.auto``, ``tqdm.notebook``). A bar that
already has ``disable=X`` gets ``disable=(X) or not accel.is_main_process()``.

## Why
Every process runs the script, so every process would draw its own bar over the
same terminal: N bars that overwrite each other, each counting one process's
steps. A disabled bar still iterates its iterable (the loop is unchanged) and
accepts ``set_postfix``, ``update`` and ``close``; it only draws nothing.

## Example
```python
# before
for images, labels in tqdm(train_loader, desc="train"):
    ...
# after
for images, labels in tqdm(train_loader, desc="train", disable=not accel.is_main_process()):
    ...
```

## Fix safety
Safe: a bar never changes what the loop computes. A call that passes
``**kwargs`` (which may hold ``disable`` already) is left as it is and reported
as needs-review.
"""

from __future__ import annotations

import libcst as cst

from ..names import TQDM_CALLS
from ..rule import Rule, tidy_args

_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript)


class ProgressBars(Rule):
    code = "AM016"
    name = "progress-bars"
    summary = "tqdm(...) -> tqdm(..., disable=not accel.is_main_process())"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self.is_call_to(original_node, TQDM_CALLS):
            return updated_node
        if any(arg.star == "**" for arg in original_node.args):
            self.report(
                original_node,
                "needs-review",
                "tqdm(**kwargs): the bar shows on every process; add disable=not accel.is_main_process()",
                if_migrated=True,
            )
            return updated_node
        main_only = cst.UnaryOperation(
            operator=cst.Not(), expression=self.runtime_call("is_main_process", [])
        )
        args = list(updated_node.args)
        for i, arg in enumerate(original_node.args):
            if arg.keyword is None or arg.keyword.value != "disable":
                continue
            if self._already(arg.value):
                return updated_node
            value = args[i].value
            if not isinstance(value, _ATOMS) and not value.lpar:
                value = value.with_changes(
                    lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
                )
            args[i] = args[i].with_changes(
                value=cst.BooleanOperation(
                    left=value, operator=cst.Or(), right=main_only
                )
            )
            break
        else:
            equal = cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.SimpleWhitespace(""),
            )
            args.append(
                cst.Arg(keyword=cst.Name("disable"), value=main_only, equal=equal)
            )
            if len(args) > 1 and args[-2].comma is not cst.MaybeSentinel.DEFAULT:
                # `tqdm(loader,)`: keep the user's trailing comma after the new one
                args[-1] = args[-1].with_changes(comma=args[-2].comma)
                args[-2] = args[-2].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        self.report(
            original_node,
            "fixed",
            "progress bar -> shown on the main process only (disable=not accel.is_main_process())",
        )
        return updated_node.with_changes(args=tidy_args(args))

    def _already(self, value: cst.BaseExpression) -> bool:
        """``disable=`` already names the runtime's is_main_process (a second run)."""
        code = cst.Module([]).code_for_node(value)
        return f"{self.context.alias}.is_main_process()" in code
