"""Where a script's local modules may be, and reading them: the project view's
(``project_view``) files.

A script's roots are its own folder (Python's ``sys.path[0]``), the folder above
its package, in a batch each folder above it up to the batch's common folder,
and each folder above it up to its project root: the nearest folder above it
with a ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``, below the
home folder. A file is read only when it is a regular file of at most
``_MAX_FILE`` bytes, parsed with ``ast``; nothing is imported, run or written.
"""

from __future__ import annotations

import ast
import os
import stat

from . import python_ast

_MAX_FILE = 2_000_000

#: What marks a project's root folder (see the module docstring).
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
#: Folders of installed packages: nothing above them is the file's project.
_INSTALLED = frozenset({"site-packages", "dist-packages"})


def project_root(folder: str) -> str:
    """The nearest folder at or above ``folder`` with a ``ROOT_MARKERS`` entry;
    "" when there is none. The home folder and the filesystem's root are never
    one: a ``.git`` of dotfiles in ``~`` would make every script under it one
    project, its ``utils.py`` everyone's ``import utils``."""
    current = folder
    home = os.path.expanduser("~")
    while True:
        if os.path.basename(current) in _INSTALLED:
            return ""  # an installed package's file: its project is not here
        if current == home or os.path.dirname(current) == current:
            return ""
        if any(os.path.exists(os.path.join(current, m)) for m in ROOT_MARKERS):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return ""
        current = parent


def roots_of(script: str, base: str = "") -> tuple[str, ...]:
    """Where an absolute import of ``script`` may find a local module (see the
    module docstring)."""
    folder = os.path.dirname(os.path.realpath(script))
    roots = [folder]
    top = folder
    while os.path.isfile(os.path.join(top, "__init__.py")):
        parent = os.path.dirname(top)
        if parent == top:
            break
        top = parent
    if base:
        inside = base.rstrip(os.sep) + os.sep
        current = folder
        while current != base and current.startswith(inside):
            current = os.path.dirname(current)
            roots.append(current)
    if top not in roots:
        roots.append(top)
    root = project_root(folder)
    current = folder
    while root and current != root:
        current = os.path.dirname(current)
        if current not in roots:
            roots.append(current)
    return tuple(roots)


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _parse(path: str) -> ast.Module | None:
    if not _regular(path):
        return None
    try:
        if os.path.getsize(path) > _MAX_FILE:
            return None
        with open(path, "rb") as handle:
            return python_ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
