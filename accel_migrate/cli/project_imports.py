"""Which files of a batch a file imports: the import statements read from its text
and resolved to the batch's files from the folders an import may search."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Sequence

from ..codemod import python_ast
from .files import FileError, read_source

_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)|import[ \t]+([\w.]+))", re.M)


def _names_local_module(text: str, stems: set[str]) -> bool:
    """Does an import line of ``text`` name one of ``stems`` (or import relatively)?"""
    for dots, module, imported in _IMPORT.findall(text):
        if dots:
            return True
        first = (module or imported).split(".")[0]
        if first in stems:
            return True
    return False


def _roots(folder: str, base: str) -> list[str]:
    """Where an absolute import may find a module of the project: the script's own
    folder (Python's ``sys.path[0]``), the folder above its package (run as
    ``python -m pkg.launch``), then each folder above it up to the batch's common
    folder (a project run from its root)."""
    roots = [folder]
    top = folder
    while os.path.isfile(os.path.join(top, "__init__.py")):
        top = os.path.dirname(top)
        if top == os.path.dirname(top):
            break
    inside = base.rstrip(os.sep) + os.sep
    while folder != base and folder.startswith(inside):
        folder = os.path.dirname(folder)
        roots.append(folder)
    if top not in roots:
        roots.append(top)
    return roots


def _local_imports(
    path: str,
    roots: Sequence[str],
    files: dict[str, int],
    cache: dict[str, tuple[tuple[int, tuple[str, ...], int], ...]],
) -> Iterable[tuple[str, int]]:
    """The files of the batch that ``path`` imports (real paths), each with the
    line of the import statement."""
    package = os.path.dirname(path)
    if path not in cache:
        cache[path] = _read_imports(path)
    for level, names, line in cache[path]:
        if level:
            folder = package
            for _ in range(level - 1):
                folder = os.path.dirname(folder)
            bases: Sequence[str] = (folder,)
        else:
            bases = roots
        for name in names:
            for found in _module_files(name, tuple(bases), files):
                yield found, line


def _read_imports(path: str) -> tuple[tuple[int, tuple[str, ...], int], ...]:
    """(relative level, dotted module names, line) of each import statement of
    ``path``."""
    try:
        tree = python_ast.parse(read_source(path))
    except (FileError, SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.append((0, tuple(alias.name for alias in node.names), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            names = [f"{module}.{a.name}".lstrip(".") for a in node.names]
            found.append(
                (
                    node.level,
                    tuple(n for n in (module, *names) if n and "*" not in n),
                    node.lineno,
                )
            )
    return tuple(found)


def _module_files(
    dotted: str, roots: tuple[str, ...], files: dict[str, int]
) -> Iterable[str]:
    """The batch's files for ``dotted`` and the packages it passes through
    (``import a.b`` runs ``a/__init__.py`` and ``a/b.py``). Paths are joined to
    real folders, so a file of the batch is found by its name (a module that is
    itself a link to another file is not followed)."""
    parts = dotted.split(".")
    for root in roots:
        for depth in range(1, len(parts) + 1):
            stem = os.path.join(root, *parts[:depth])
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                if candidate in files:
                    yield candidate
