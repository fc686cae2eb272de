"""Rendering results for people: diffs, the findings table, the summary tables and
line, the progress bar.

With report_formats.py (JSON, GitHub, SARIF), the only place that turns findings
into text. Imported lazily: rich is not needed for ``--help``.
"""

from __future__ import annotations

import difflib
import io
import os
import tokenize
from collections import Counter
from collections.abc import Sequence
from types import TracebackType
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from ..codemod.findings import Failure, Finding, MigrationResult
from .report_formats import Outcome, display_path, rule_names, summarize

_STATUS_STYLE = {"fixed": "green", "needs-review": "bold yellow", "info": "cyan"}


def decode(source: str | bytes) -> str:
    if isinstance(source, str):
        return source
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    return source.decode(encoding)


def _lines(text: str) -> list[str]:
    """Lines ending at "\n" only, as git and patch see them.

    ``str.splitlines`` also splits at form feeds, "\r", "\x1c" and other
    separators, which would make a diff that ``git apply`` rejects.
    """
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def unified_diff(result: MigrationResult) -> str:
    before = _lines(decode(result.source))
    after = _lines(decode(result.output))
    name = display_path(result.path).replace(os.sep, "/")
    lines = difflib.unified_diff(before, after, f"a/{name}", f"b/{name}")
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in lines
    )


def write_diff(diff: str, stream: IO[str], color: bool) -> None:
    if not color:
        stream.write(diff)
        return
    console = Console(
        file=stream,
        force_terminal=True,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,
    )
    for line in diff.splitlines():
        style = ""
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        console.print(Text(line, style=style))


def findings_table(results: Sequence[MigrationResult]) -> Table | None:
    rows = [(r, f) for r in results for f in r.findings]
    if not rows:
        return None
    table = Table(title="findings", title_justify="left", expand=False)
    table.add_column("location", no_wrap=True)
    table.add_column("rule")
    table.add_column("status")
    table.add_column("message")
    for result, finding in rows:
        table.add_row(
            f"{display_path(result.path)}:{finding.line}:{finding.column}",
            finding.code,
            Text(finding.status, style=_STATUS_STYLE[finding.status]),
            finding.message,
        )
    return table


def write_report(
    outcomes: Sequence[Outcome],
    stream: IO[str],
    color: bool,
    *,
    mode: str,
    quiet: bool = False,
) -> None:
    """Findings table, the summary tables (for more than one file), one line per
    failure, and the summary line last."""
    results = [o for o in outcomes if isinstance(o, MigrationResult)]
    failures = [o for o in outcomes if isinstance(o, Failure)]
    console = Console(
        file=stream,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        markup=False,
        emoji=False,
        width=_width(stream),
    )
    table = None if quiet else findings_table(results)
    if table is not None:
        console.print(table)
    if not quiet and len(outcomes) > 1:
        for part in summary_tables(outcomes, mode):
            console.print(part)
    if not quiet:
        places = suppressions_table(results)
        if places is not None:
            console.print(places)
    # One line each, however long: editors and grep read ``path:line:col: ...``.
    for failure in failures:
        console.print(
            Text(f"error: {failure_line(failure)}", style="bold red"), soft_wrap=True
        )
    console.print(summary(outcomes, mode), soft_wrap=True)


def failure_line(failure: Failure) -> str:
    return (
        f"{display_path(failure.path)}:{failure.line}:{failure.column}: "
        f"{failure.message}"
    )


def concise_line(path: str, finding: Finding) -> str:
    """``path:line:col: CODE [status] message``: one line, as ruff's concise
    format (its ``[*]`` marks what it fixes; the status says it here)."""
    return finding.format(path)


def write_concise(
    outcomes: Sequence[Outcome],
    stream: IO[str],
    color: bool,
    *,
    mode: str,
    quiet: bool = False,
) -> None:
    """One line per finding and per failure, then the summary line."""
    console = Console(
        file=stream,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        markup=False,
        emoji=False,
    )
    if not quiet:
        for outcome in outcomes:
            if isinstance(outcome, MigrationResult):
                shown = display_path(outcome.path)
                for finding in outcome.findings:
                    style = "yellow" if finding.status == "needs-review" else ""
                    console.print(
                        Text(concise_line(shown, finding), style=style), soft_wrap=True
                    )
    for outcome in outcomes:
        if isinstance(outcome, Failure):
            console.print(
                Text(f"error: {failure_line(outcome)}", style="bold red"),
                soft_wrap=True,
            )
    console.print(summary(outcomes, mode), soft_wrap=True)


def suppressions_table(results: Sequence[MigrationResult]) -> Table | None:
    """Where ``# accel-migrate: skip`` left statements alone, and for which rules."""
    rows = []
    for result in results:
        rules = result.suppressed_rules
        for n, line in enumerate(result.suppressed):
            rows.append(
                (
                    f"{display_path(result.path)}:{line}",
                    rules[n] if n < len(rules) else "every rule",
                )
            )
    if not rows:
        return None
    table = Table(title="suppressed statements", title_justify="left", expand=False)
    table.add_column("location", no_wrap=True)
    table.add_column("left alone by")
    for row in rows:
        table.add_row(*row)
    return table


def summary_tables(outcomes: Sequence[Outcome], mode: str) -> list[Table]:
    """Files by status; rewrites per rule; the findings that need review."""
    counts = summarize(outcomes)
    files = Table(title="summary", title_justify="left", show_header=False)
    files.add_column("what")
    files.add_column("files", justify="right")
    files.add_row("scanned", str(counts.scanned))
    files.add_row(
        "migrated" if mode == "write" else "would be migrated", str(counts.changed)
    )
    files.add_row("unchanged", str(counts.unchanged))
    files.add_row("skipped", str(counts.skipped_total))
    for reason in (
        "not a training entry point",
        "already distributed",
        "suppressed",
        "generated",
    ):
        files.add_row(f"  {reason}", str(counts.skipped.get(reason, 0)))
    files.add_row("failed", str(counts.failed))
    files.add_row("statements suppressed", str(counts.suppressed))
    tables = [files]
    if counts.rewrites:
        names = rule_names()
        rewrites = Table(title="rewrites per rule", title_justify="left")
        rewrites.add_column("rule")
        rewrites.add_column("name")
        rewrites.add_column("rewrites", justify="right")
        for code, number in counts.rewrites.items():
            rewrites.add_row(code, names.get(code, ("",))[0], str(number))
        tables.append(rewrites)
    if counts.review:
        review = Table(title="needs review", title_justify="left")
        review.add_column("location", no_wrap=True)
        review.add_column("rule")
        review.add_column("message")
        for path, finding in counts.review:
            review.add_row(
                f"{display_path(path)}:{finding.line}", finding.code, finding.message
            )
        tables.append(review)
    return tables


def summary(outcomes: Sequence[Outcome], mode: str) -> str:
    results = [o for o in outcomes if isinstance(o, MigrationResult)]
    failed = len(outcomes) - len(results)
    counts = Counter(r.status for r in results)
    verb = "migrated" if mode == "write" else "would be migrated"
    parts = [f"{counts['changed']} file{'s' if counts['changed'] != 1 else ''} {verb}"]
    if counts["unchanged"]:
        parts.append(f"{counts['unchanged']} unchanged")
    if counts["skipped"]:
        reasons = Counter(r.skip_reason for r in results if r.skip_reason)
        parts.append(
            ", ".join(
                f"{n} skipped ({reason})" for reason, n in sorted(reasons.items())
            )
        )
    suppressed = sum(len(r.suppressed) for r in results)
    if suppressed:
        parts.append(
            f"{suppressed} statement{'s' if suppressed != 1 else ''} suppressed"
        )
    review = sum(len(r.needs_review) for r in results)
    if review:
        parts.append(f"{review} finding{'s need' if review != 1 else ' needs'} review")
    if failed:
        parts.append(f"{failed} failed")
    return ", ".join(parts) + "."


class ProgressBar:
    """A transient progress bar on stderr, for runs on a terminal."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task = None
        self.total = total

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self._progress = Progress(
                TextColumn("migrating"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("files"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
                redirect_stdout=True,
                redirect_stderr=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("migrate", total=self.total)
        return self

    def advance(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _width(stream: IO[str]) -> int | None:
    return None if getattr(stream, "isatty", lambda: False)() else 160
