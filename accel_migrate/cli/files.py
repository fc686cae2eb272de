"""Finding the files to migrate, reading them, and writing them back safely."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: Folders never worth walking into.
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "env",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "node_modules",
        "build",
        "dist",
        "site-packages",
        ".eggs",
    }
)


_WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


class FileError(Exception):
    """A file that cannot be read or written; the message names it."""


def discover(paths: list[str]) -> Iterator[str]:
    """The Python files named by ``paths``: files as given, folders walked.

    A folder's files come in sorted order; a file named twice (directly, through
    a folder, or through a link) comes once, the first time.
    """
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        found = sorted(_walk(path)) if path.is_dir() else [raw]
        for name in found:
            key = os.path.realpath(name)
            if key not in seen:
                seen.add(key)
                yield str(name)


def _walk(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".")
        )
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name


def read_source(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise FileError(f"{path}:1:1: no such file") from None
    except IsADirectoryError:
        raise FileError(f"{path}:1:1: is a directory") from None
    except OSError as exc:
        raise FileError(f"{path}:1:1: cannot read: {exc.strerror or exc}") from None


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step, keeping its permission bits.

    The new content goes to a temporary file in the same folder, which is then
    renamed over the original: a crash or an interrupt leaves either the old file
    or the new one, never half of it.
    """
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
        # No write bit means read-only, also for root, whom os.access lets write.
        if not mode & _WRITE_BITS or not os.access(target, os.W_OK):
            raise FileError(f"{path}:1:1: cannot write: file is read-only")
        handle, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder
        )
    except FileError:
        raise
    except OSError as exc:
        raise FileError(f"{path}:1:1: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise FileError(
                f"{path}:1:1: cannot write: {exc.strerror or exc}"
            ) from None
        raise
