"""The calls that save, load or open a file, as the rules that move writes to
the main process test for them: ``torch.save``'s and ``torch.load``'s names, its
target argument, ``open``'s names and whether its mode writes (AM010's
``torch_save``, ``saves_read_back``, ``file_reads``, ``file_tests``)."""

from __future__ import annotations

import libcst as cst

from .patterns import argument, string_value

SAVE_CALLS = {"torch.save", "torch.serialization.save"}
LOAD_CALLS = {"torch.load", "torch.serialization.load"}
OPEN_CALLS = frozenset({"builtins.open", "io.open"})


def write_mode(call: cst.Call) -> str | None:
    """The mode of ``open(path, mode)`` when it writes (``w``, ``a``, ``x`` or
    ``+``), given as a string literal; None otherwise."""
    mode = argument(call, 1, "mode")
    value = string_value(mode) if mode is not None else None
    if value is not None and any(c in value for c in "wax+"):
        return value
    return None


def save_target(call: cst.Call) -> cst.BaseExpression | None:
    """The ``f`` argument of ``torch.save(obj, f, ...)``."""
    return argument(call, 1, "f")
