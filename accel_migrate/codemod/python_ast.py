"""``ast.parse``, one call at a time in a process.

CPython 3.11 keeps the recursion depth that ``ast.parse`` checks while it builds
its tree in the interpreter's state, shared by every thread. A garbage
collection during that build (libcst and black make much cyclic garbage) may
switch threads; a parse in the other thread then moves the shared depth, and the
first fails with ``SystemError: AST constructor recursion depth mismatch``.
Migrating files in threads (a caller's thread pool, the soundness tests) hit it.
Every parse of the package goes through ``parse`` (and ``literal_eval``, which
parses a string), under one lock; a test holds the package to it.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> Any:
    """``ast.parse(source, filename, mode)``, under the process's parse lock."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def literal_eval(node_or_string: str | ast.AST) -> Any:
    """``ast.literal_eval``, under the same lock: given a string, it parses."""
    with _LOCK:
        return ast.literal_eval(node_or_string)
