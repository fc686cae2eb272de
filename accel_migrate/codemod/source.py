"""Reading Python source bytes the way Python does, with errors that name the place."""

from __future__ import annotations

import io
import re
import tokenize

from . import python_ast
from .findings import MigrationError

#: Python's own line breaks. ``str.splitlines`` also splits on ``\f``, ``\v``,
#: ``\x85`` and U+2028, which are not line breaks to the parser (line numbers of
#: ``ast`` and libcst would drift from ours).
NEWLINE = re.compile(r"\r\n|\r|\n")


def check_decodable(path: str, data: bytes) -> str:
    """The encoding ``data`` declares, or MigrationError naming where it fails.

    Python reads a file as UTF-8 unless a coding cookie (``# -*- coding: X -*-``)
    on its first two lines says otherwise.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # a bad cookie, or non-UTF-8 bytes before any cookie
        _check_decodes(path, data, "utf-8")
        raise MigrationError(path, 1, 1, f"cannot decode: {exc.msg}") from None
    _check_decodes(path, data, encoding)
    return encoding


def _check_decodes(path: str, data: bytes, encoding: str) -> None:
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        hint = (
            "; save it as UTF-8 or declare its encoding on line 1 or 2"
            " (# -*- coding: latin-1 -*-)"
            if encoding.lower().replace("_", "-") in ("utf-8", "utf-8-sig")
            else ""
        )
        raise MigrationError(
            path,
            line,
            column,
            f"cannot decode: byte 0x{data[exc.start]:02x} is not valid {encoding}{hint}",
        ) from None


def syntax_error_place(source: str | bytes) -> tuple[int, int, str] | None:
    """Python's own line, column and message for a syntax error, if it finds one.

    libcst points at the token after the error and repeats positions in its
    message; the compiler's report is what users know from tracebacks.
    """
    try:
        python_ast.parse(source)
    except SyntaxError as exc:
        return exc.lineno or 1, exc.offset or 1, exc.msg
    except (ValueError, RecursionError, MemoryError):
        return None
    return None
