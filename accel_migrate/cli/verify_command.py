"""``accel-migrate verify``: migrate into a temporary folder, run the original on one
process and the migrated copy on N, compare every step's loss, report.

The user's script is never written; it is run, because the user asked for it.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..codemod import MigrationError, MigrationResult, migrate_source
from ..runtime.config import ConfigError, load_config
from ..verify.compare import BANDS, TOLERANCES, Verdict, compare
from . import render
from .app import EXIT_FAILED, EXIT_OK, EXIT_USAGE

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


def run_verify(script: str, script_args: list[str], **options: Any) -> int:
    err = Console(stderr=True, highlight=False, markup=False, emoji=False)
    path = Path(script)
    try:
        config = load_config(
            {"strategy": options["strategy"], "precision": options["precision"]}
        )
        if not path.is_file():
            raise ConfigError(f"{script}: no such script")
        if options["steps"] < 1 or options["nproc"] < 1:
            raise ConfigError("--steps and --nproc must be at least 1")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        migration = migrate_source(path.read_bytes(), str(path))
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
    env = _environment(path.resolve())
    steps = str(options["steps"])
    with tempfile.TemporaryDirectory(prefix="accel-migrate-verify-") as folder:
        work = Path(folder)
        migrated = work / path.name
        output = migration.output
        migrated.write_bytes(output if isinstance(output, bytes) else output.encode())
        launch = ["--nproc", str(options["nproc"])]
        if options["strategy"]:
            launch += ["--strategy", options["strategy"]]
        if options["precision"]:
            launch += ["--precision", options["precision"]]
        try:
            err.print(f"running the original on 1 process for {steps} steps ...")
            original = _run(
                "the original",
                [
                    sys.executable,
                    "-m",
                    "accel_migrate.verify.runner",
                    "--record",
                    str(work / "original.json"),
                    "--steps",
                    steps,
                    "--mode",
                    "original",
                    str(path.resolve()),
                    "--",
                    *script_args,
                ],
                env,
                work / "original.json",
            )
            err.print(f"running the migrated copy on {options['nproc']} processes ...")
            result = _run(
                "the migrated script",
                [
                    sys.executable,
                    "-m",
                    "accel_migrate",
                    "launch",
                    *launch,
                    str(RUNNER),
                    "--record",
                    str(work / "migrated.json"),
                    "--steps",
                    steps,
                    "--mode",
                    "migrated",
                    str(migrated),
                    "--",
                    *script_args,
                ],
                env,
                work / "migrated.json",
            )
        except RunFailed as failure:
            err.print(
                Text(
                    f"error: {failure.which} crashed (exit code {failure.code}); this is not a parity result:",
                    style="bold red",
                )
            )
            err.print(_tail(failure.stderr))
            if options["report"]:
                Path(options["report"]).write_text(
                    _crash_report(path, migration, failure)
                )
            return EXIT_FAILED
    verdict = compare(original, result, tolerance, options["nproc"], band)
    _print_verdict(verdict, Console(highlight=False, markup=False, emoji=False))
    if options["report"]:
        Path(options["report"]).write_text(
            markdown_report(path, migration, verdict, options["nproc"])
        )
        err.print(f"report written to {options['report']}")
    return EXIT_OK if verdict.agrees else EXIT_DIFFERS


def _tail(text: str, lines: int = 40) -> str:
    kept = [line for line in text.splitlines() if not line.startswith(("W11", "I11"))]
    return "\n".join(kept[-lines:])


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.8g}"


def _print_verdict(verdict: Verdict, console: Console) -> None:
    table = Table(
        title=f"losses: original (1 process) vs migrated; tolerance {verdict.tolerance_text}",
        title_justify="left",
    )
    for column in ("#", "step", "original", "migrated", "relative error"):
        table.add_column(column, justify="right")
    for row in verdict.rows:
        style = (
            "bold red"
            if row is verdict.first_divergence
            else ("red" if row.error > verdict.limit(row) else "")
        )
        error = "-" if math.isinf(row.error) else f"{row.error:.1e}"
        table.add_row(
            str(row.index),
            str(row.step),
            _number(row.original),
            _number(row.migrated),
            error,
            style=style,
        )
    console.print(table)
    for line in plot(verdict):
        console.print(line)
    console.print(
        Text(summary(verdict), style="bold green" if verdict.agrees else "bold red")
    )
    for cause in verdict.causes:
        console.print(f"  likely cause: {cause}")


def summary(verdict: Verdict) -> str:
    if verdict.agrees:
        return (
            f"PASS: {len(verdict.rows)} losses over {verdict.original_steps} steps agree "
            f"(worst relative error {verdict.worst_error:.1e}, parameters {verdict.parameter_error:.1e}, "
            f"tolerance {verdict.tolerance_text})"
        )
    if verdict.first_divergence is not None:
        row = verdict.first_divergence
        return (
            f"FAIL: the losses diverge at step {row.step} (loss #{row.index}): "
            f"{_number(row.original)} vs {_number(row.migrated)}"
        )
    return (
        f"FAIL: steps {verdict.original_steps} vs {verdict.migrated_steps}, "
        f"parameter error {verdict.parameter_error:.1e} (tolerance {verdict.parameter_tolerance:g})"
    )


def plot(verdict: Verdict, width: int = 60, height: int = 8) -> list[str]:
    """Both loss curves as a small text plot: o original, x migrated, * both."""
    values = [
        v
        for row in verdict.rows
        for v in (row.original, row.migrated)
        if v is not None and math.isfinite(v)
    ]
    if len(verdict.rows) < 2 or not values:
        return []
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    columns = min(width, len(verdict.rows))
    grid = [[" "] * columns for _ in range(height)]
    for column in range(columns):
        row = verdict.rows[column * len(verdict.rows) // columns]
        for value, mark in ((row.original, "o"), (row.migrated, "x")):
            if value is None or not math.isfinite(value):
                continue
            line = height - 1 - round((value - low) / span * (height - 1))
            grid[line][column] = "*" if grid[line][column] not in (" ", mark) else mark
    labels = [f"{high:10.4g} |", *[" " * 10 + " |"] * (height - 2), f"{low:10.4g} |"]
    return [
        label + "".join(cells) for label, cells in zip(labels, grid, strict=True)
    ] + [" " * 12 + "o original   x migrated   * both"]


def _findings_table(migration: MigrationResult) -> list[str]:
    rows = ["| line | rule | status | message |", "| --- | --- | --- | --- |"]
    for f in migration.findings:
        message = f.message.replace("|", "\\|")
        rows.append(f"| {f.line} | {f.code} | {f.status} | {message} |")
    return rows if migration.findings else ["(none)"]


def _migration_section(path: Path, migration: MigrationResult) -> list[str]:
    fixed = sum(1 for f in migration.findings if f.status == "fixed")
    review = len(migration.needs_review)
    return [
        "## Migration",
        "",
        f"{fixed} rewrites, {review} finding{'s' if review != 1 else ''} to review.",
        "",
        "<details><summary>diff</summary>",
        "",
        "```diff",
        render.unified_diff(migration).rstrip("\n"),
        "```",
        "",
        "</details>",
        "",
        "### Findings",
        "",
        *_findings_table(migration),
        "",
    ]


def markdown_report(
    path: Path, migration: MigrationResult, verdict: Verdict, nproc: int
) -> str:
    lines = [
        f"# accel-migrate verify: `{path.name}`",
        "",
        f"**{summary(verdict)}**",
        "",
        *[f"- likely cause: {cause}" for cause in verdict.causes],
        "",
        *_migration_section(path, migration),
        f"## Losses: original (1 process) vs migrated ({nproc} processes)",
        "",
        "| # | step | original | migrated | relative error |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in verdict.rows:
        error = "-" if math.isinf(row.error) else f"{row.error:.1e}"
        lines.append(
            f"| {row.index} | {row.step} | {_number(row.original)} | {_number(row.migrated)} | {error} |"
        )
    return "\n".join(lines) + "\n"


def _crash_report(path: Path, migration: MigrationResult, failure: RunFailed) -> str:
    return "\n".join(
        [
            f"# accel-migrate verify: `{path.name}`",
            "",
            f"**ERROR: {failure.which} crashed (exit code {failure.code}); no parity result.**",
            "",
            "```",
            _tail(failure.stderr),
            "```",
            "",
            *_migration_section(path, migration),
        ]
    )
