"""Does a script use the runtime? Read from its source, never by running it.

``accel-migrate launch`` of a script that was never migrated starts N copies of
the single-process script: every line prints N times, every process trains on all
the data, and every process writes the same checkpoint files. Nothing fails, so the
launcher warns before it starts anything.

The check is static and errs on the side of silence: a script counts as migrated
when it, or a module of its own folder that it imports (followed a few levels
deep), imports ``accel_migrate.runtime`` in any spelling, or names it in a string
(``importlib.import_module("accel_migrate.runtime")``). A file that does not parse
is not judged: Python reports it once the job starts.
"""

from __future__ import annotations

import ast
from pathlib import Path

from ..codemod import python_ast

RUNTIME = "accel_migrate.runtime"
#: Levels of the script's own imports followed (script -> utils -> trainer).
_DEPTH = 3


def _is_runtime(module: str) -> bool:
    return module == RUNTIME or module.startswith(RUNTIME + ".")


def _imports(tree: ast.AST) -> tuple[bool, list[tuple[str, int]]]:
    """(uses the runtime, the other modules imported as (name, relative level))."""
    others: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_runtime(alias.name):
                    return True, []
                others.append((alias.name, 0))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and (
                _is_runtime(module)
                or (
                    module == "accel_migrate"
                    and any(a.name == "runtime" for a in node.names)
                )
            ):
                return True, []
            others.append((module, node.level))
            # `from . import utils`, `from pkg import helpers`: each name may be a module.
            others.extend(
                (f"{module}.{a.name}" if module else a.name, node.level)
                for a in node.names
            )
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _is_runtime(node.value)
        ):
            return True, []
    return False, others


def _local_file(top: Path, importer: Path, module: str, level: int) -> Path | None:
    """The file of the script's own folder that ``module`` names, if any.

    Absolute imports start from the script's folder (``sys.path[0]``), relative
    ones from the importing file's.
    """
    base = top if level == 0 else importer.parent
    for _ in range(max(level - 1, 0)):
        base = base.parent
    parts = [part for part in module.split(".") if part]
    if not parts:
        candidate = base / "__init__.py"
        return candidate if candidate.is_file() else None
    path = base.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def uses_runtime(script: Path) -> bool | None:
    """True or False, or None when the script could not be read or parsed."""
    seen: set[Path] = set()
    top = script.resolve().parent
    frontier = [script.resolve()]
    for depth in range(_DEPTH + 1):
        following: list[Path] = []
        for path in frontier:
            if path in seen:
                continue
            seen.add(path)
            try:
                tree = python_ast.parse(path.read_bytes(), filename=str(path))
            except (OSError, SyntaxError, ValueError):
                if path == script.resolve():
                    return None
                continue
            found, others = _imports(tree)
            if found:
                return True
            if depth < _DEPTH:
                for module, level in others:
                    local = _local_file(top, path, module, level)
                    if local is not None:
                        following.append(local.resolve())
        frontier = following
    return False


def unmigrated_warning(script: str, processes: int, nnodes: str) -> str | None:
    """The launcher's warning for a script that never imports the runtime."""
    if processes == 1 and nnodes in ("1", "1:1"):
        return None  # one process runs the script as written: nothing is repeated
    if uses_runtime(Path(script)) is not False:
        return None
    copies = f"{processes}" if nnodes in ("1", "1:1") else f"{processes} per node"
    return (
        f"warning: {script} never imports {RUNTIME}: it was not migrated, so each of "
        f"the {copies} processes runs the whole single-process script. Every line "
        f"prints once per process, every process trains its own model on all the "
        f"data, and every process writes the same checkpoint files. Migrate it first: "
        f"accel-migrate migrate --write {script} (with the local modules it imports: "
        f"accel-migrate migrate --write {Path(script).parent}); where that leaves it "
        "unchanged, its needs-review findings say why"
    )
