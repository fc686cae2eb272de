"""Which files of a batch a file imports: the import statements read from its text
and resolved to the batch's files from the folders an import may search."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Sequence

from ..codemod import python_ast
from .files import FileError, read_source

_PICKED = re.compile(r"import_module\(\s*f?[\"'](\w+)\.")
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)|import[ \t]+([\w.]+))", re.M)


def _names_local_module(text: str, stems: set[str]) -> bool:
    """Does an import line of ``text`` name one of ``stems`` (or import relatively)?"""
    for dots, module, imported in _IMPORT.findall(text):
        if dots:
            return True
        first = (module or imported).split(".")[0]
        if first in stems:
            return True
    # `importlib.import_module("model." + args.model)` (_picked_package)
    return any(stem in stems for stem in _PICKED.findall(text))


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
            if name.endswith(".*"):
                # `importlib.import_module("model." + args.model)`: any module of
                # the package may be the one imported
                yield from ((f, line) for f in _package_files(name[:-2], bases, files))
                continue
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
        picked = _picked_package(node)
        if picked:
            found.append((0, (picked + ".*",), node.lineno))
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


def _picked_package(node: ast.AST) -> str:
    """``model`` for ``importlib.import_module("model." + args.model)`` (or an
    f-string ``f"model.{name}"``): a module of a local package picked by name
    at run time (GradientEpisodicMemory's main.py); "" otherwise."""
    if not (
        isinstance(node, ast.Call)
        and node.args
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
            or (isinstance(node.func, ast.Name) and node.func.id == "import_module")
        )
    ):
        return ""
    name = node.args[0]
    head: ast.expr | None = None
    if isinstance(name, ast.BinOp) and isinstance(name.op, ast.Add):
        head = name.left
    elif isinstance(name, ast.JoinedStr) and name.values:
        head = name.values[0]
    if (
        isinstance(head, ast.Constant)
        and isinstance(head.value, str)
        and head.value.endswith(".")
        and all(part.isidentifier() for part in head.value[:-1].split("."))
    ):
        return head.value[:-1]
    return ""


def _package_files(
    package: str, roots: Sequence[str], files: dict[str, int]
) -> list[str]:
    """The batch's modules right in ``package``'s folder, under each root."""
    found = []
    for root in roots:
        folder = os.path.join(root, *package.split("."))
        found += sorted(
            f for f in files if os.path.dirname(f) == folder and f.endswith(".py")
        )
    return found


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
