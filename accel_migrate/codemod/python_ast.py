"""``ast.parse``, one call at a time in a process.

CPython 3.11 keeps the recursion depth that ``ast.parse`` checks while it builds
its tree in the interpreter's state, shared by every thread. A garbage
collection during that build (libcst and black make much cyclic garbage) may
switch threads; a parse in the other thread then moves the shared depth, and the
first fails with ``SystemError: AST constructor recursion depth mismatch``.
Migrating files in threads (a caller's thread pool, the soundness tests) hit it.
Every parse of the package goes through ``parse``, under one lock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, under the process's parse lock."""
    with _LOCK:
        return ast.parse(source, filename=filename)
