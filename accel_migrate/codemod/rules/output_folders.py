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
as it is and reported as needs-review.

``mkdir`` imported on its own (``from os import mkdir``, world-models'
``mkdir(vae_dir)``) becomes ``makedirs(vae_dir, exist_ok=True)``, and
``makedirs`` joins the names that import brings (``from os import mkdir,
makedirs``): the import statement the file has is extended, no new one is
added. Where ``makedirs`` already names something else in the file, the call is
left as it is and reported as needs-review.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..amp import is_false
from ..rule import Rule, tidy_args
from ..subtrees import findall

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


def _with_exist_ok_arg(arguments: Sequence[cst.Arg]) -> list[cst.Arg]:
    args = [*arguments]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return tidy_args([*args, _exist_ok()])


def _from_os(statement: cst.ImportFrom) -> bool:
    return not statement.relative and m.matches(statement.module, m.Name("os"))


def _imports_mkdir(statement: cst.ImportFrom) -> bool:
    """``from os import mkdir`` (also ``mkdir as mk``, beside other names)."""
    return (
        _from_os(statement)
        and not isinstance(statement.names, cst.ImportStar)
        and any(alias.evaluated_name == "mkdir" for alias in statement.names)
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

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom:
        """``from os import mkdir`` -> ``from os import mkdir, makedirs`` where a
        call of that ``mkdir`` becomes ``makedirs(..., exist_ok=True)``."""
        if not self._imported_mkdir_calls or not _imports_mkdir(original_node):
            return updated_node
        names = updated_node.names
        assert not isinstance(names, cst.ImportStar)  # _imports_mkdir
        if any(alias.evaluated_name == "makedirs" for alias in names):
            return updated_node
        last = names[-1].with_changes(
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
        added = cst.ImportAlias(name=cst.Name("makedirs"))
        return updated_node.with_changes(names=[*names[:-1], last, added])

    @cached_property
    def _imported_mkdir_calls(self) -> bool:
        """Has the file a call of ``mkdir`` imported from ``os`` that becomes
        ``makedirs(...)`` (so its import must bring ``makedirs`` too)?"""
        return (
            any(
                isinstance(call.func, cst.Name)
                and self.is_call_to(call, _MKDIR)
                and self._plain_mkdir(call)
                for call in self.index.calls
            )
            and self._makedirs_free()
        )

    def _makedirs_free(self) -> bool:
        """Is ``makedirs`` bound, if at all, only by ``from os import`` lines?"""
        if self.index.star_import:
            return False
        if any(key[1] == "makedirs" for key in self.index.values):
            return False
        for statement in findall(self.index.module, m.FunctionDef() | m.ClassDef()):
            if statement.name.value == "makedirs":  # type: ignore[attr-defined]
                return False
        for statement in findall(self.index.module, m.Import() | m.ImportFrom()):
            if isinstance(statement, cst.ImportFrom) and _from_os(statement):
                continue
            names = statement.names  # type: ignore[attr-defined]
            if not isinstance(names, cst.ImportStar) and any(
                (a.asname.name.value if a.asname else a.evaluated_name) == "makedirs"  # type: ignore[union-attr]
                for a in names
            ):
                return False
        return True

    def _plain_mkdir(self, call: cst.Call) -> bool:
        return not any(arg.star for arg in call.args) and not any(
            arg.keyword is not None and arg.keyword.value == "dir_fd"
            for arg in call.args
        )

    def _mkdir(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if (
            isinstance(func, cst.Name)
            and self._imported_mkdir_calls
            and self._plain_mkdir(original)
        ):
            self.report(
                original,
                "fixed",
                "mkdir -> makedirs(..., exist_ok=True) (imported from os beside "
                "mkdir): every process may make the folder",
            )
            return updated.with_changes(
                func=cst.Name("makedirs"), args=_with_exist_ok_arg(updated.args)
            )
        if any(arg.star for arg in original.args) or not isinstance(
            func, cst.Attribute
        ):
            why = (
                " (`makedirs` names something else in this file, so it is not "
                "imported beside `mkdir`)"
                if isinstance(func, cst.Name) and self._plain_mkdir(original)
                else ""
            )
            self.report(
                original,
                "needs-review",
                "mkdir() on every process: all but the first fail with "
                f"FileExistsError{why}; use os.makedirs(path, exist_ok=True)"
                + (
                    " (with `import os`)"
                    if why and not self.index.bound_in_module("os")
                    else ""
                ),
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
        return updated.with_changes(
            func=func.with_changes(attr=cst.Name("makedirs")),
            args=_with_exist_ok_arg(updated.args),
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
