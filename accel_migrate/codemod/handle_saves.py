"""Saves into a file handle, the part of AM010 (``torch_save``) that reads
``open(...)``: the ``open`` call whose file a save's target names
(``_opened_handle``), and the ``with open(path, "wb") as f: torch.save(obj, f)``
blocks that collapse into one ``accel.save(obj, path)`` (``_collapsible``,
``collapsed_saves``).

A mixin of the rule: it reads the rule's ``index`` and ``is_call_to``.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from .file_changes import argument
from .save_calls import OPEN_CALLS, SAVE_CALLS, save_target, write_mode
from .subtrees import findall


class HandleSaves:
    """AM010's facts on saves into a file opened by ``open(...)``."""

    def _opened_handle(self, target: cst.BaseExpression) -> cst.Call | None:
        """The ``open(path, ...)`` call whose file ``target`` names: the target of
        an enclosing ``with open(...) as f``, or a variable only ever set to
        ``open(...)``."""
        if not isinstance(target, cst.Name):
            return None
        for ancestor in self.index.ancestors(target):
            if isinstance(ancestor, cst.With):
                for item in ancestor.items:
                    if (
                        item.asname is not None
                        and isinstance(item.asname.name, cst.Name)
                        and item.asname.name.value == target.value
                    ):
                        opened = item.item
                        if self.is_call_to(opened, OPEN_CALLS):
                            return opened  # type: ignore[return-value]
                        return None
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                break
        key = self.index.key(target)
        if key is None:
            return None
        values = self.index.values.get(key, [])
        if values and all(self.is_call_to(v, OPEN_CALLS) for v in values):
            return values[0]  # type: ignore[return-value]
        return None

    def _collapsible(
        self, node: cst.With
    ) -> tuple[cst.Call, cst.BaseExpression] | None:
        """``with open(path, "wb") as f: torch.save(obj, f)``, and nothing else: the
        save and the path."""
        if len(node.items) != 1 or node.asynchronous is not None:
            return None
        item = node.items[0]
        opened = item.item
        if not (
            self.is_call_to(opened, OPEN_CALLS)
            and isinstance(item.asname, cst.AsName)
            and isinstance(item.asname.name, cst.Name)
        ):
            return None
        assert isinstance(opened, cst.Call)
        mode = write_mode(opened)
        if mode is None or "w" not in mode or len(opened.args) > 2:
            return None
        if any(
            arg.keyword is not None and arg.keyword.value != "mode"
            for arg in opened.args
        ):
            return None
        body = node.body
        if not (
            isinstance(body, cst.IndentedBlock)
            and len(body.body) == 1
            and isinstance(body.body[0], cst.SimpleStatementLine)
            and len(body.body[0].body) == 1
            and isinstance(body.body[0].body[0], cst.Expr)
        ):
            return None
        save = body.body[0].body[0].value
        if not self.is_call_to(save, SAVE_CALLS):
            return None
        assert isinstance(save, cst.Call)
        handle = item.asname.name.value
        target = save_target(save)
        if not (isinstance(target, cst.Name) and target.value == handle):
            return None
        obj = argument(save, 0, "obj")
        if obj is None or any(
            n.value == handle for n in findall(obj, m.Name())  # type: ignore[attr-defined]
        ):
            return None
        if any(
            arg.keyword is not None and arg.keyword.value not in ("obj", "f")
            for arg in save.args
        ):
            return None
        return save, opened.args[0].value

    @cached_property
    def collapsed_saves(self) -> set[cst.Call]:
        return {
            found[0]
            for with_node in findall(self.index.module, m.With())
            if (found := self._collapsible(with_node)) is not None  # type: ignore[arg-type]
        }
