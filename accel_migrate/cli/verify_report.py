"""What ``accel-migrate verify`` prints and writes: the outcome of a comparison, its
loss table and plot, its verdict line and the markdown report."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..codemod import MigrationResult
from ..verify.compare import Verdict
from . import render
from .verify_project import ProjectMigration


@dataclass(frozen=True)
class Outcome:
    """The comparison, and the deterministic one that checked a stochastic difference."""

    verdict: Verdict
    checked: Verdict | None
    deterministic: bool

    @property
    def stochastic_only(self) -> bool:
        return self.checked is not None and self.checked.agrees

    @property
    def passes(self) -> bool:
        return self.verdict.agrees or self.stochastic_only

    @property
    def causes(self) -> tuple[str, ...]:
        if self.checked is not None and not self.checked.agrees:
            return self.verdict.causes + tuple(
                f"with stochastic layers off: {cause}" for cause in self.checked.causes
            )
        return self.verdict.causes


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.8g}"


def _print_outcome(outcome: Outcome, console: Console) -> None:
    _print_table(outcome.verdict, console)
    if outcome.checked is not None:
        console.print(
            Text(
                f"not exact ({summary(outcome.verdict)}); with stochastic layers off:",
                style="yellow",
            )
        )
        _print_table(outcome.checked, console, " (--deterministic)")
    console.print(
        Text(summary_of(outcome), style="bold green" if outcome.passes else "bold red")
    )
    for cause in outcome.causes:
        console.print(f"  likely cause: {cause}")


def _print_table(verdict: Verdict, console: Console, label: str = "") -> None:
    table = Table(
        title=f"losses: original (1 process) vs migrated{label}; tolerance {verdict.tolerance_text}",
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


def summary_of(outcome: Outcome) -> str:
    """The verdict line: PASS, PASS as statistically equivalent, or FAIL."""
    if outcome.stochastic_only and outcome.checked is not None:
        checked = outcome.checked
        return (
            f"PASS (stochastic layers: statistically equivalent): the losses differ "
            f"only by the noise of the stochastic layers; with dropout off and the "
            f"step's random draws made identical (--deterministic), "
            f"{len(checked.rows)} losses over {checked.original_steps} steps agree "
            f"(worst relative error {checked.worst_error:.1e}, parameters "
            f"{checked.parameter_error:.1e}, tolerance {checked.tolerance_text})"
        )
    line = summary(outcome.verdict if outcome.checked is None else outcome.checked)
    if outcome.deterministic and outcome.verdict.agrees:
        line += "; dropout off and the step's random draws identical (--deterministic)"
    if outcome.checked is not None and not outcome.checked.agrees:
        line = line.replace("FAIL:", "FAIL (with stochastic layers off):", 1)
    return line


def summary(verdict: Verdict) -> str:
    if verdict.agrees:
        note = f"; note: {verdict.note}" if verdict.note else ""
        return (
            f"PASS: {len(verdict.rows)} losses over {verdict.original_steps} steps agree "
            f"(worst relative error {verdict.worst_error:.1e}, parameters {verdict.parameter_error:.1e}, "
            f"tolerance {verdict.tolerance_text}){note}"
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


def _migration_section(
    path: Path, migration: MigrationResult, project: ProjectMigration | None = None
) -> list[str]:
    fixed = sum(1 for f in migration.findings if f.status == "fixed")
    review = len(migration.needs_review)
    together = ["```", *project.describe(), "```", ""] if project is not None else []
    return [
        "## Migration",
        "",
        f"{fixed} rewrites, {review} finding{'s' if review != 1 else ''} to review.",
        "",
        *together,
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
    path: Path,
    migration: MigrationResult,
    outcome: Outcome,
    nproc: int,
    project: ProjectMigration | None = None,
) -> str:
    verdict = outcome.checked if outcome.checked is not None else outcome.verdict
    lines = [
        f"# accel-migrate verify: `{path.name}`",
        "",
        f"**{summary_of(outcome)}**",
        "",
        *[f"- likely cause: {cause}" for cause in outcome.causes],
        "",
        *_migration_section(path, migration, project),
        f"## Losses: original (1 process) vs migrated ({nproc} processes)"
        + (" with stochastic layers off" if outcome.checked is not None else ""),
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
