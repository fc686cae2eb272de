"""The files of one batch are one project: what an already-distributed entry point
imports stays as it is.

A library module (``train.py`` of a Hogwild ``main.py``, the ``engine.py`` of a DDP
launcher) may look like a single-GPU training script on its own: it has the loop,
the loader, the optimizer. Rewritten, it would call the runtime inside a program that
already runs its own processes and process group. So the local imports of each
already-distributed file are followed (transitively, to the files of this batch
only), and any of them that would be rewritten or reported is left unchanged
instead, with one finding naming the file that imports it.

Files are written as they are migrated; only those that a file which may be
distributed imports (``suspects``, found before the batch starts) wait for the end.

Static only: imports are read with Python's ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Sequence

from ..codemod.findings import SKIP_DISTRIBUTED, Failure, Finding, MigrationResult
from ..codemod.screen import SCREEN_CODE, may_be_distributed
from .files import FileError, read_source

Outcome = MigrationResult | Failure


class Project:
    """The batch's files, and which of them an already-distributed file imports."""

    def __init__(self, paths: Sequence[str], locations: Sequence[str]) -> None:
        self.paths = list(paths)
        self.files = [os.path.realpath(loc) for loc in locations]
        self.index = {real: i for i, real in enumerate(self.files)}
        folders = [os.path.dirname(real) for real in self.index]
        self.base = os.path.commonpath(folders) if len(folders) > 1 else ""

    def imported_by(self, entry: int) -> set[int]:
        """The batch's files that file ``entry`` imports, directly or through
        another of them."""
        if not self.base:
            return set()
        start = self.files[entry]
        roots = _roots(os.path.dirname(start), self.base)
        queue, seen = [start], {start}
        while queue:
            for found in _local_imports(queue.pop(), roots, self.index):
                if found not in seen:
                    seen.add(found)
                    queue.append(found)
        return {self.index[real] for real in seen if real != start}

    def suspects(self) -> set[int]:
        """Files whose result must wait for the whole batch: those imported by a
        file that may be distributed (a word of the screen in its text). Cheap:
        substring tests, and ``ast`` only for those few files."""
        found: set[int] = set()
        if not self.base:
            return found
        for entry, real in enumerate(self.files):
            try:
                text = read_source(real).decode("utf-8", errors="replace")
            except FileError:
                continue
            if may_be_distributed(text):
                found |= self.imported_by(entry)
        return found

    def keep_distributed_imports(
        self, outcomes: Sequence[Outcome | None]
    ) -> list[Outcome | None]:
        """``outcomes`` (by file), with the local modules that an already-distributed
        file imports turned into unchanged, skipped results."""
        result = list(outcomes)
        importer: dict[int, int] = {}  # library -> the distributed file importing it
        for entry, outcome in enumerate(outcomes):
            if _distributed(outcome):
                for library in self.imported_by(entry):
                    importer.setdefault(library, entry)
        for library, entry in sorted(importer.items()):
            outcome = result[library]
            if (
                isinstance(outcome, MigrationResult)
                and outcome.skip_reason is None
                and (outcome.changed or outcome.findings)
            ):
                result[library] = MigrationResult(
                    outcome.path,
                    outcome.source,
                    outcome.source,
                    (
                        Finding(
                            1,
                            1,
                            SCREEN_CODE,
                            "info",
                            f"imported by {self.paths[entry]}, which is already "
                            "distributed; left unchanged",
                        ),
                    ),
                    skip_reason=SKIP_DISTRIBUTED,
                )
        return result


def _distributed(outcome: Outcome | None) -> bool:
    return (
        isinstance(outcome, MigrationResult) and outcome.skip_reason == SKIP_DISTRIBUTED
    )


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
    path: str, roots: Sequence[str], files: dict[str, int]
) -> Iterable[str]:
    """The files of the batch that ``path`` imports (real paths)."""
    try:
        tree = ast.parse(read_source(path))
    except (FileError, SyntaxError, ValueError, RecursionError, MemoryError):
        return
    package = os.path.dirname(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _module_files(alias.name, roots, files)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                folder = package
                for _ in range(node.level - 1):
                    folder = os.path.dirname(folder)
                bases = [folder]
                module = node.module or ""
            else:
                bases = list(roots)
                module = node.module or ""
            names = [a.name for a in node.names if a.name != "*"]
            for name in [module] + [f"{module}.{n}".lstrip(".") for n in names]:
                if name:
                    yield from _module_files(name, bases, files)


def _module_files(
    dotted: str, roots: Sequence[str], files: dict[str, int]
) -> Iterable[str]:
    """The batch's files for ``dotted`` and the packages it passes through
    (``import a.b`` runs ``a/__init__.py`` and ``a/b.py``)."""
    parts = dotted.split(".")
    for root in roots:
        for depth in range(1, len(parts) + 1):
            stem = os.path.join(root, *parts[:depth])
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                real = os.path.realpath(candidate)
                if real in files:
                    yield real
