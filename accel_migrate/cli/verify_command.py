"""``accel-migrate verify``: migrate into a temporary folder, run the original on one
process and the migrated copy on N, compare every step's loss, report.

The user's script is never written; it is run, because the user asked for it.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from ..codemod import MigrationError, MigrationResult, migrate_source
from ..runtime.config import ConfigError, load_config
from ..verify import FAILURE_END, FAILURE_START
from ..verify.compare import (
    BANDS,
    TOLERANCES,
    Verdict,
    compare,
    stochastic_sources,
)
from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from .launch_command import check_launch
from .run_cli import scale_arguments, scale_settings
from .verify_project import ProjectMigration, local_modules, migrate_project
from .verify_report import Outcome, _migration_section, _print_outcome, markdown_report

EXIT_DIFFERS = 1
RUNNER = Path(__file__).resolve().parents[1] / "verify" / "runner.py"


class RunFailed(Exception):
    def __init__(self, which: str, code: int, stderr: str) -> None:
        super().__init__(which)
        self.which, self.code, self.stderr = which, code, stderr


def _environment(script: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    # The migrated copy lives in a temporary folder; imports of the script's
    # sibling modules must still resolve.
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(script.parent), env.get("PYTHONPATH")])
    )
    env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun gives each process
    return env


def _run(
    which: str, command: list[str], env: dict[str, str], record: Path
) -> dict[str, Any]:
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not record.exists():
        raise RunFailed(which, done.returncode, done.stderr or done.stdout)
    return json.loads(record.read_text())


def line_map(original: str, migrated: str) -> dict[int, tuple[int, bool]]:
    """Migrated line -> (the user's line, whether the migration rewrote it); lines
    the migration added are absent."""
    before, after = original.splitlines(), migrated.splitlines()
    mapping: dict[int, tuple[int, bool]] = {}
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for k in range(j2 - j1):
                mapping[j1 + k + 1] = (i1 + k + 1, False)
        elif tag == "replace":
            for k in range(j2 - j1):
                mapping[j1 + k + 1] = (i1 + min(k, i2 - i1 - 1) + 1, True)
    return mapping


@dataclass(frozen=True)
class Pair:
    original: dict[str, Any]
    migrated: dict[str, Any]


class _Runs:
    """Runs the original on one process and the migrated copy on N, as asked."""

    def __init__(
        self,
        path: Path,
        migration: MigrationResult,
        work: Path,
        options: Any,
        project: ProjectMigration | None = None,
    ) -> None:
        self.path, self.work, self.options = path, work, options
        self.env = _environment(path.resolve())
        output = migration.output
        text = output if isinstance(output, bytes) else output.encode()
        if project is not None:
            # migrated with its local modules (verify_project): it runs among them
            self.migrated = project.migrated_script
        else:
            self.migrated = work / path.name
            self.migrated.write_bytes(text)
        mapping = line_map(
            path.read_bytes().decode(errors="replace"), text.decode(errors="replace")
        )
        self.line_map = work / "line_map.json"
        self.line_map.write_text(json.dumps(mapping))

    def pair(self, err: Console, deterministic: bool) -> Pair:
        options, work, steps = self.options, self.work, str(self.options["steps"])
        flag = ["--deterministic"] if deterministic else []
        mode = " (deterministic)" if deterministic else ""
        record = "det" if deterministic else "run"
        launch = ["--nproc", str(options["nproc"])]
        if options["strategy"]:
            launch += ["--strategy", options["strategy"]]
        if options["precision"]:
            launch += ["--precision", options["precision"]]
        launch += scale_arguments(options)
        shown = ["--display-path", str(self.path), "--line-map", str(self.line_map)]
        # the elements whose gradients were rounding alone in the original: the
        # migrated run checksums the others apart (compare's traced parameters)
        rounding = str(work / f"original-{record}.rounding.pt")
        err.print(
            f"running the original on 1 process for up to {steps} steps{mode} ..."
        )
        original = _run(
            "the original",
            [
                *[sys.executable, "-m", "accel_migrate.verify.runner"],
                *["--record", str(work / f"original-{record}.json")],
                *["--steps", steps, "--mode", "original", *flag],
                *["--rounding-out", rounding],
                *["--display-path", str(self.path)],
                *[str(self.path.resolve()), "--", *options["script_args"]],
            ],
            self.env,
            work / f"original-{record}.json",
        )
        err.print(
            f"running the migrated copy on {options['nproc']} processes{mode} ..."
        )
        migrated = _run(
            "the migrated script",
            [
                *[
                    sys.executable,
                    "-m",
                    "accel_migrate",
                    "launch",
                    *launch,
                    str(RUNNER),
                ],
                *["--record", str(work / f"migrated-{record}.json")],
                *["--steps", steps, "--mode", "migrated", *flag, *shown],
                *["--rounding", rounding],
                *[str(self.migrated), "--", *options["script_args"]],
            ],
            self.env,
            work / f"migrated-{record}.json",
        )
        return Pair(original, migrated)


def run_verify(script: str, script_args: list[str], **options: Any) -> int:
    err = _console(stderr=True)
    path = Path(script)
    try:
        config = load_config(
            {
                "strategy": options["strategy"],
                "precision": options["precision"],
                **scale_settings(options),
            }
        )
        if not path.is_file():
            raise ConfigError(f"{script}: no such script")
        if options["steps"] < 1 or options["nproc"] < 1:
            raise ConfigError("--steps and --nproc must be at least 1")
        # What the launcher of the migrated run would refuse, said before the
        # original runs (DeepSpeed missing, fp16 on the CPU, HSDP on one node).
        check_launch(config, options["nproc"], "1", command="verify")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="accel-migrate-verify-") as folder:
        return _verify_in(Path(folder), path, config, script_args, options, err)


def _verify_in(
    work: Path,
    path: Path,
    config: Any,
    script_args: list[str],
    options: dict[str, Any],
    err: Console,
) -> int:
    script = str(path)
    project = None
    modules = local_modules(path)
    if modules:
        # helper modules the setup may spread over: migrated with the script,
        # as batch mode would (verify_project)
        project = migrate_project(path, modules, work)
        if project is None:
            err.print(
                "could not migrate the script with its local modules "
                f"({', '.join(m.name for m in modules)}) as a project; verifying the "
                "script alone: those modules run as they are, unmigrated"
            )
    try:
        migration = (
            project.script
            if project is not None
            else migrate_source(path.read_bytes(), str(path))
        )
    except MigrationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if migration.skip_reason is not None:
        print(
            f"error: {script}: nothing to verify ({migration.skip_reason})",
            file=sys.stderr,
        )
        return EXIT_USAGE
    tolerance = options["tolerance"] or TOLERANCES[config.precision]
    band = (
        None if options["tolerance"] else BANDS.get((config.strategy, config.precision))
    )
    nproc, deterministic = options["nproc"], bool(options.get("deterministic"))
    options = {**options, "script_args": script_args}
    checked: Verdict | None = None
    if project is not None:
        for line in project.describe():
            err.print(Text(line))
    note = review_note(path.name, len(migration.needs_review))
    if note:
        err.print(Text(note))
    runs = _Runs(path, migration, work, options, project)
    try:
        pair = runs.pair(err, deterministic)
        verdict = compare(pair.original, pair.migrated, tolerance, nproc, band)
        sources = stochastic_sources(pair.original, pair.migrated)
        if not deterministic and not verdict.agrees and sources and nproc > 1:
            # Is the noise the only cause? The same runs with it taken out
            # must then agree exactly.
            err.print(
                f"the losses differ and the script is stochastic "
                f"({', '.join(sources)}): checking the rest with --deterministic"
            )
            again = runs.pair(err, deterministic=True)
            checked = compare(again.original, again.migrated, tolerance, nproc, band)
    except RunFailed as failure:
        err.print(
            Text(
                f"error: {failure.which} crashed (exit code {failure.code}); "
                "this is not a parity result:",
                style="bold red",
            )
        )
        err.print(failure_text(failure.stderr))
        if options["report"]:
            Path(options["report"]).write_text(
                _crash_report(path, migration, failure, project)
            )
        return EXIT_FAILED
    outcome = Outcome(verdict, checked, deterministic)
    _print_outcome(outcome, _console(stderr=False))
    if options["report"]:
        Path(options["report"]).write_text(
            markdown_report(path, migration, outcome, nproc, project)
        )
        err.print(f"report written to {options['report']}")
    return EXIT_OK if outcome.passes else EXIT_DIFFERS


def review_note(name: str, review: int) -> str:
    """The line that says the script's own findings to review, before the runs:
    a comparison of the losses does not see everything a finding names (an
    evaluation line, a sample image, a checkpoint), so a PASS does not clear
    them. "" when there is none."""
    if not review:
        return ""
    return (
        f"{name}: {review} finding{'s' if review != 1 else ''} to review "
        f"(`accel-migrate {name}` lists them); agreeing losses do not clear them"
    )


def _console(stderr: bool) -> Console:
    """Rich wraps at 80 columns (or ``COLUMNS``) when the output is not a terminal:
    a log or a pipe gets whole lines instead."""
    console = Console(stderr=stderr, highlight=False, markup=False, emoji=False)
    if not console.is_terminal:
        console = Console(
            stderr=stderr,
            highlight=False,
            markup=False,
            emoji=False,
            width=100_000,
            soft_wrap=True,
        )
    return console


def failure_text(stderr: str) -> str:
    """The first failing rank's traceback as the runner printed it (once, the user's
    file and lines), else the end of the output without the launcher's log lines."""
    start = stderr.find(FAILURE_START)
    if start >= 0:
        end = stderr.find(FAILURE_END, start)
        if end >= 0:
            block = stderr[start:end].splitlines()[1:]
            return "\n".join(block)
    return _tail(stderr)


def _tail(text: str, lines: int = 40) -> str:
    kept = [line for line in text.splitlines() if not line.startswith(("W11", "I11"))]
    return "\n".join(kept[-lines:])


def _crash_report(
    path: Path,
    migration: MigrationResult,
    failure: RunFailed,
    project: ProjectMigration | None = None,
) -> str:
    return "\n".join(
        [
            f"# accel-migrate verify: `{path.name}`",
            "",
            f"**ERROR: {failure.which} crashed (exit code {failure.code}); no parity result.**",
            "",
            "```",
            failure_text(failure.stderr),
            "```",
            "",
            *_migration_section(path, migration, project),
        ]
    )
