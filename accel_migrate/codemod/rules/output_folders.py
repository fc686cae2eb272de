"""AM018 output-folders: folders are made so that every process may make them at once.

## What
- ``os.mkdir(path)`` becomes ``os.makedirs(path, exist_ok=True)`` (a ``mode``
  argument is kept);
- ``os.makedirs(path)`` without ``exist_ok`` gets ``exist_ok=True``;
- ``Path(...).mkdir(...)`` (``pathlib``, directly or through a variable only ever
  set to a ``Path``) without ``exist_ok`` gets ``exist_ok=True``.

## Why
Every process runs the script, so every process makes the output folder. The
usual guard, ``if not os.path.isdir(d): os.mkdir(d)``, is a race: two processes
both see no folder, both make it, and the slower one stops with
``FileExistsError``. With ``exist_ok=True`` every process may make it; each
finds it made afterwards. The folder is made on every process, not only on the
main one, because the script may test for it (``if os.path.isdir(d):
accel.save(...)``): every process must take the same branch.

## Example
```python
# before
if not os.path.isdir("checkpoint"):
    os.mkdir("checkpoint")
# after
if not os.path.isdir("checkpoint"):
    os.makedirs("checkpoint", exist_ok=True)
```

## Fix safety
Safe for output folders. Two differences from ``os.mkdir``: missing parent
folders are made too, and an existing folder is no error. A script that relies
on that error (``os.mkdir`` as a lock, ``exist_ok=False`` written out) is left
as it is and reported as needs-review, and so is ``mkdir`` imported on its own
(``from os import mkdir``: ``makedirs`` is not imported there).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..amp import is_false
from ..rule import Rule, tidy_args

_MKDIR = frozenset({"os.mkdir"})
_MAKEDIRS = frozenset({"os.makedirs"})
_PATHS = frozenset({"pathlib.Path", "pathlib.PosixPath", "pathlib.WindowsPath"})


def _exist_ok() -> cst.Arg:
    return cst.Arg(
        keyword=cst.Name("exist_ok"),
        value=cst.Name("True"),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""),
            whitespace_after=cst.SimpleWhitespace(""),
        ),
    )


class OutputFolders(Rule):
    code = "AM018"
    name = "output-folders"
    summary = "os.mkdir(d) -> os.makedirs(d, exist_ok=True) (every process may make it)"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if self.is_call_to(original_node, _MKDIR):
            return self._mkdir(original_node, updated_node)
        if self.is_call_to(original_node, _MAKEDIRS):
            return self._with_exist_ok(
                original_node, updated_node, "os.makedirs", position=2
            )
        func = original_node.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "mkdir"
            and self._is_path(func.value)
        ):
            return self._with_exist_ok(
                original_node, updated_node, "Path.mkdir", position=2
            )
        return updated_node

    def _mkdir(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if any(arg.star for arg in original.args) or not isinstance(
            func, cst.Attribute
        ):
            self.report(
                original,
                "needs-review",
                "mkdir() on every process: all but the first fail with FileExistsError; "
                "use os.makedirs(path, exist_ok=True)",
                if_migrated=True,
            )
            return updated
        if any(
            arg.keyword is not None and arg.keyword.value == "dir_fd"
            for arg in original.args
        ):
            self.report(
                original,
                "needs-review",
                "os.mkdir(dir_fd=...) on every process: all but the first fail with FileExistsError",
                if_migrated=True,
            )
            return updated
        self.report(
            original,
            "fixed",
            "os.mkdir -> os.makedirs(..., exist_ok=True): every process may make the folder",
        )
        args = [*updated.args]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(
            func=func.with_changes(attr=cst.Name("makedirs")),
            args=tidy_args([*args, _exist_ok()]),
        )

    def _with_exist_ok(
        self, original: cst.Call, updated: cst.Call, what: str, position: int
    ) -> cst.BaseExpression:
        """Add ``exist_ok=True`` (the ``position``-th positional parameter)."""
        if any(arg.star for arg in original.args):
            return updated
        positional = [a for a in original.args if a.keyword is None]
        given = [
            a
            for a in original.args
            if a.keyword is not None and a.keyword.value == "exist_ok"
        ]
        if len(positional) > position:
            given.append(positional[position])
        if given:
            if is_false(given[0].value):
                self.report(
                    original,
                    "needs-review",
                    f"{what}(exist_ok=False) on every process: all but the first fail with FileExistsError",
                    if_migrated=True,
                )
            return updated
        self.report(
            original,
            "fixed",
            f"{what}(...) -> exist_ok=True: every process may make the folder",
        )
        args = [*updated.args]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=tidy_args([*args, _exist_ok()]))

    def _is_path(self, expr: cst.BaseExpression) -> bool:
        return is_path(self, expr)


def is_path(rule: Rule, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``Path(...)``, ``Path(...) / "x"``, ``p.parent``, or a variable only ever
    set to one of those."""
    if depth > 3:
        return False
    if isinstance(expr, cst.Call):
        return bool(rule.qualnames(expr.func) & _PATHS)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        return is_path(rule, expr.left, depth + 1)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "parent":
        return is_path(rule, expr.value, depth + 1)
    if m.matches(expr, m.Name() | m.Attribute()):
        key = rule.index.key(expr)
        values = rule.index.values.get(key, []) if key is not None else []
        return bool(values) and all(
            v is not None and is_path(rule, v, depth + 1) for v in values
        )
    return False
