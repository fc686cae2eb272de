"""Saves whose file is read again, in AM010 (``torch_save``): a ``torch.load``
or ``open`` of the same file later in the script (or in another function,
which may run after the save whatever the lines), or its path handed on to a
function or class of the project that may load it. There the rule adds a
barrier after ``accel.save``, so that no process reads the file before the
main process has written it.

A mixin of the rule: it reads the rule's ``index``, ``is_call_to``,
``get_metadata``, ``_in_memory``, ``_opened_handle`` and ``collapsed_saves``.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
from libcst.metadata import PositionProvider

from .file_changes import argument, per_process
from .file_reads import path_template, same_template


class ReadBack:
    """AM010's saves of files that the script reads again."""

    def _read_again(self, path: cst.BaseExpression, save: cst.Call) -> bool:
        from .save_calls import LOAD_CALLS, OPEN_CALLS

        line = self.get_metadata(PositionProvider, save).start.line
        for call in self.index.calls:
            if not (
                self.is_call_to(call, LOAD_CALLS) or self.is_call_to(call, OPEN_CALLS)
            ):
                continue
            source = (
                argument(call, 0, "f")
                if self.is_call_to(call, LOAD_CALLS)
                else (call.args[0].value if call.args else None)
            )
            if source is None:
                continue
            if self.is_call_to(source, OPEN_CALLS) and source.args:  # type: ignore[attr-defined]
                source = source.args[0].value  # type: ignore[attr-defined]
            later = self.get_metadata(PositionProvider, call).start.line
            if (later > line or self._loaded_elsewhere(call, save)) and self._same_file(
                path, source
            ):
                return True
        return False

    def _reads_of(self, path: cst.BaseExpression) -> list[cst.Call]:
        """Every ``torch.load`` or ``open`` of the file ``path`` names, wherever
        it is (``save_tries``: is one inside the ``try`` around the save?)."""
        from .save_calls import LOAD_CALLS, OPEN_CALLS

        found = []
        for call in self.index.calls:
            loads = self.is_call_to(call, LOAD_CALLS)
            if not (loads or self.is_call_to(call, OPEN_CALLS)):
                continue
            source = (
                argument(call, 0, "f")
                if loads
                else (call.args[0].value if call.args else None)
            )
            if source is not None and self.is_call_to(source, OPEN_CALLS):
                source = source.args[0].value if source.args else None  # type: ignore[attr-defined]
            if source is not None and self._same_file(path, source):
                found.append(call)
        found.extend(  # handed to a function of the project, which may load it
            call
            for call in self.index.calls
            if (
                self.index.callee(call) is not None
                or self.index.helper(call.func) is not None
            )
            and any(self._same_file(path, arg.value) for arg in call.args)
        )
        return found

    def _loaded_elsewhere(self, load: cst.Call, save: cst.Call) -> bool:
        """Is ``load`` in another function than ``save`` (or one of them at
        module level)? Then it may run after the save whatever their lines:
        philipperemy/n-beats' ``load(net, optimiser)`` (line 60) reads the
        checkpoint that ``save(...)`` (line 70) writes, both called from
        ``train_100_grad_steps``, which the script calls again and again."""
        return self.index.enclosing_function(load) is not self.index.enclosing_function(
            save
        )

    @cached_property
    def read_back(self) -> set[cst.Call]:
        """Saves to a file that the script loads again further down: every process
        reads it, so they must wait until the main process has written it."""
        from .save_calls import LOAD_CALLS, SAVE_CALLS, save_target

        load_calls = [
            (call, path)
            for call in self.index.calls
            if self.is_call_to(call, LOAD_CALLS) and (path := argument(call, 0, "f"))
        ]
        saves = [c for c in self.index.calls if self.is_call_to(c, SAVE_CALLS)]
        if not load_calls and not any(
            (t := save_target(c)) is not None
            and path_template(self.index, t) is not None
            for c in saves
        ):
            return set()  # nothing is read back: no tree's positions are needed
        loads = [
            (self.get_metadata(PositionProvider, call).start.line, path)
            for call, path in load_calls
        ]
        found = set()
        for call in saves:
            target = save_target(call)
            if target is None or self._in_memory(target):
                continue
            if per_process(self.index, target):
                continue  # each process reads its own file (``per_process``)
            if call in self.collapsed_saves or self._opened_handle(target):
                continue
            line = self.get_metadata(PositionProvider, call).start.line
            if any(
                (later > line or self._loaded_elsewhere(load, call))
                and self._same_file(target, path)
                for (later, path), (load, _) in zip(loads, load_calls, strict=True)
            ) or self._handed_on(call, target):
                found.add(call)
        return found

    def _handed_on(self, save: cst.Call, target: cst.BaseExpression) -> bool:
        """Is a path that may name the saved file handed, after the save (or from
        another function), to a function or class of the project, which may load
        it? pytorch/examples' super_resolution pickles the model to
        ``"model_epoch_{}.pth".format(epoch)`` in ``checkpoint(epoch)`` and
        hands ``"model_epoch_{}.pth".format(opt.nEpochs)`` to super_resolve.py,
        whose ``torch.load`` the other processes would run before the main
        process has written the file. A barrier after a save that every process
        reaches costs one wait where the path is handed to a function that does
        not read it."""
        if path_template(self.index, target) is None:
            return False
        line = self.get_metadata(PositionProvider, save).start.line
        for other in self.index.calls:
            if other is save or not (
                self.index.callee(other) is not None
                or self.index.helper(other.func) is not None
            ):
                continue
            later = self.get_metadata(PositionProvider, other).start.line
            if not (later > line or self._loaded_elsewhere(other, save)):
                continue
            if any(self._same_file(target, arg.value) for arg in other.args):
                return True
        return False

    def _same_file(self, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
        """The same path code (the same variable), or two paths built from one
        template (``path_template``): they may name the same file."""
        code = cst.Module([]).code_for_node
        if code(a) == code(b):
            return not isinstance(a, cst.Name) or self.index.key(a) == self.index.key(b)
        return same_template(self.index, a, b)
