"""``accel-migrate verify`` on a script with local modules: migrate them as a project.

A script alone is migrated reading its local imports but never writing them. A
training setup spread over helper modules (``engine.py`` running the loop,
``metrics.py`` summing the accuracy) needs them rewritten too: batch mode
(``accel-migrate main.py engine.py metrics.py --write``) does that, the single
file mode cannot. So verify copies the script and the local modules it imports
(directly or through each other, inside the script's folder) into its temporary
folder and migrates the copies as one batch, by the command line itself, as the
user would; the migrated script runs there, its migrated modules first on the
import path. What was rewritten and reported in each file is said, on the
terminal and in the report. Modules outside the script's folder are read, not
migrated, and verify says so.

The user's files are never written. Static only until the runs: imports are
read with ``ast`` (``project_imports._local_imports``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..codemod import MigrationResult
from ..codemod.findings import Finding
from .project_imports import _local_imports

#: Folders never searched for local modules (environments, caches, VCS).
_SKIPPED_FOLDERS = frozenset(
    {".git", ".hg", ".venv", "venv", "env", "__pycache__", "node_modules", "build"}
)
#: At most this many Python files of the script's folder are considered.
_MAX_FILES = 2000


@dataclass
class ProjectMigration:
    """The batch migration of a script and its local modules, in ``folder``."""

    folder: Path
    #: The script's own result (its output is the migrated copy's text).
    script: MigrationResult
    #: The local modules migrated with it, relative to the script's folder, each
    #: with its status ("changed", "unchanged", "skipped", "failed") and findings.
    modules: list[tuple[str, str, tuple[Finding, ...]]] = field(default_factory=list)

    @property
    def migrated_script(self) -> Path:
        return self.folder / Path(self.script.path).name

    def describe(self) -> list[str]:
        """Lines for the terminal and the report: what was migrated with the script."""
        names = ", ".join(name for name, _, _ in self.modules)
        lines = [
            f"migrated {Path(self.script.path).name} with its local modules {names} "
            "as one project (batch mode, as `accel-migrate "
            f"{Path(self.script.path).name} {' '.join(n for n, _, _ in self.modules)}"
            " --write` would; your files are not touched):"
        ]
        for name, status, findings in self.modules:
            review = [f for f in findings if f.status == "needs-review"]
            word = {"changed": "rewritten", "unchanged": "unchanged"}.get(
                status, status
            )
            lines.append(
                f"  {name}: {word}"
                + (f", {len(review)} finding(s) to review" if review else "")
            )
            lines += [
                f"    {name}:{f.line}:{f.column}: {f.code} {f.message}" for f in review
            ]
        return lines


def local_modules(script: Path) -> list[Path]:
    """The local module files ``script`` imports, directly or through each other,
    inside its folder (as batch mode resolves them), in a stable order."""
    folder = script.resolve().parent
    files: dict[str, int] = {}
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(
            d for d in dirs if d not in _SKIPPED_FOLDERS and not d.startswith(".")
        )
        for name in sorted(names):
            if name.endswith(".py"):
                files[os.path.realpath(os.path.join(root, name))] = len(files)
        if len(files) > _MAX_FILES:
            return []  # a whole tree, not a project folder: the script alone
    start = os.path.realpath(script)
    reached = {start}
    queue = [start]
    cache: dict[str, tuple[tuple[int, tuple[str, ...], int], ...]] = {}
    while queue:
        current = queue.pop(0)
        for found, _ in _local_imports(current, [str(folder)], files, cache):
            if found not in reached:
                reached.add(found)
                queue.append(found)
    return sorted(Path(p) for p in reached if p != start)


def migrate_project(
    script: Path, modules: list[Path], work: Path
) -> ProjectMigration | None:
    """Copy ``script`` and ``modules`` into ``work`` (their layout kept) and migrate
    the copies as one batch; None when the batch run failed (the caller then says
    so and verifies the script alone)."""
    base = script.resolve().parent
    folder = work / "project"
    copies = []
    for source in [script.resolve(), *modules]:
        relative = source.relative_to(base)
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        copies.append(str(relative))
    done = subprocess.run(
        [
            *[sys.executable, "-m", "accel_migrate", "--write", "--no-cache"],
            *["--output-format", "json", "--color", "never", *copies],
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError:
        return None
    entries = {entry["path"]: entry for entry in document.get("files", [])}
    own = entries.get(copies[0])
    if own is None or own.get("status") == "failed":
        return None
    source = script.read_bytes()
    migration = MigrationResult(
        str(script),
        source,
        (folder / copies[0]).read_bytes(),
        _findings(own),
        own.get("skip_reason"),
    )
    found = ProjectMigration(folder, migration)
    for relative in copies[1:]:
        entry = entries.get(relative, {})
        status = entry.get("status", "unchanged")
        if status == "skipped" and entry.get("skip_reason"):
            status = f"left as it is ({entry['skip_reason']})"
        found.modules.append((relative, status, _findings(entry)))
    return found


def _findings(entry: dict) -> tuple[Finding, ...]:
    return tuple(
        Finding(f["line"], f["column"], f["code"], f["status"], f["message"])
        for f in entry.get("findings", [])
    )
