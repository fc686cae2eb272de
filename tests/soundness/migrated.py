"""A case's migration, in its mode: the script alone (file mode) or the whole
project folder through the CLI (batch mode), written into the migrated run's folder.

File mode is ``accel-migrate main.py --write``: local imports are read, never
written, so a project folder's helper modules are copied next to the migrated copy
unchanged. Batch mode is ``accel-migrate FOLDER --write`` on a copy of the folder:
every file may be rewritten, and the findings of every file count. The command
runs in a process of its own, forked from a server that has imported the CLI and
the rules (tests/warm_python.py, kind ``codemod``): its imports cost a fresh
interpreter 0.9 s of CPU, about half of a project folder's migration.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests import warm_python
from tests.conftest import ROOT
from tests.parity.harness import _environment, migrate_to, migration

from .cases import Case

#: Seconds the CLI may take to migrate one project folder.
CLI_TIMEOUT = 120


@dataclass(frozen=True)
class Migrated:
    """What the codemod did to a case, and the script the migrated run starts."""

    changed: bool
    script: Path
    #: Every needs-review finding's code, sorted, each once (every file's, in batch).
    needs_review: tuple[str, ...]
    #: Every info finding's code.
    info: frozenset[str]
    skip_reason: str = ""
    #: Files the CLI failed on ("path: message"), batch mode only.
    failures: tuple[str, ...] = ()


def migrate_case(case: Case, folder: Path) -> Migrated:
    """Migrate ``case`` into ``folder`` (the migrated run's working folder)."""
    if case.mode == "batch":
        return _batch(case, folder)
    result = migration(case.script)
    script = case.script
    if result.changed:
        for helper in case.helpers:
            copy = folder / helper.relative_to(case.script.parent)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(helper, copy)
        script = migrate_to(case.script, folder)
    return Migrated(
        changed=result.changed,
        script=script,
        needs_review=tuple(sorted({f.code for f in result.needs_review})),
        info=frozenset(f.code for f in result.findings if f.status == "info"),
        skip_reason=result.skip_reason or "",
    )


def _batch(case: Case, folder: Path) -> Migrated:
    project = folder / "project"
    shutil.copytree(
        case.script.parent, project, ignore=shutil.ignore_patterns("__pycache__")
    )
    env = _environment()
    env["PYTHONPATH"] = str(ROOT)
    # (a fork of a warm interpreter that has imported the CLI and every rule:
    # tests/warm_python.py's ``codemod`` server; the command is the user's)
    done = subprocess.run(
        [
            *[warm_python.python(env, "codemod"), "-m", "accel_migrate", "migrate"],
            *[str(project), "--write", "--no-cache", "--output-format", "json"],
            *["--jobs", "1"],
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(CLI_TIMEOUT),
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(
            f"accel-migrate {project} --write printed no JSON report "
            f"(exit {done.returncode}): {done.stderr[-600:]}"
        ) from exc
    files = report["files"]
    findings = [f for entry in files for f in entry.get("findings", [])]
    main = project / "main.py"
    skip = next((e["skip_reason"] for e in files if Path(e["path"]) == main), "")
    return Migrated(
        changed=any(e["status"] == "changed" for e in files),
        script=main,
        needs_review=tuple(
            sorted({f["code"] for f in findings if f["status"] == "needs-review"})
        ),
        info=frozenset(f["code"] for f in findings if f["status"] == "info"),
        skip_reason=skip or "",
        failures=tuple(
            f"{Path(e['path']).relative_to(project)}: {e.get('error', e['status'])}"
            for e in files
            if e["status"] == "failed"
        ),
    )
