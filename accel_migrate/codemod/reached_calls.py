"""The calls a call runs through the local functions it calls (the
interprocedural fact a rule asks instead of reading a branch's text).

``if accel.is_main_process(): save_weights(net, epoch)`` names no collective,
but ``save_weights`` calls ``accel.state_dict(model)``, which under FSDP is one
every process must join. ``ReachedCalls.through(call)`` answers the calls that
run when ``call`` runs: those of the body of the local function (or method, or
constructor) it calls (``ModuleIndex.callee``), and, transitively, of the local
functions those call. Each function's answer is computed once per tree.

Only functions of this file: an imported helper is known by its
``HelperFact`` (``collectives``), not by its calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .index_syntax import _calls_run_by

if TYPE_CHECKING:
    from .analysis import ModuleIndex


class ReachedCalls:
    """What each local function runs, its callees' calls included."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self._of: dict[cst.FunctionDef, tuple[cst.Call, ...]] = {}

    def through(self, call: cst.Call) -> tuple[cst.Call, ...]:
        """The calls that run in the local function ``call`` runs (and in the
        local functions it calls, at any depth); empty for any other call."""
        found = self.index.callee(call)
        return () if found is None else self.of_function(found[0])

    def of_function(self, function: cst.FunctionDef) -> tuple[cst.Call, ...]:
        if function in self._of:
            return self._of[function]
        self._of[function] = ()  # recursion: what is found so far
        calls: list[cst.Call] = []
        for call in _calls_run_by(function.body):
            calls.append(call)
            calls.extend(self.through(call))
        result = tuple(dict.fromkeys(calls))
        self._of[function] = result
        return result
