"""Rendering results for people: diffs, the findings table, the summary line.

The only place that turns findings into text. Imported lazily: rich is not needed
for ``--help``.
"""

from __future__ import annotations

import difflib
import io
import os
import tokenize
from collections import Counter
from collections.abc import Sequence
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..codemod.findings import MigrationResult

_STATUS_STYLE = {"fixed": "green", "needs-review": "bold yellow", "info": "cyan"}


def decode(source: str | bytes) -> str:
    if isinstance(source, str):
        return source
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    return source.decode(encoding)


def display_path(path: str) -> str:
    """Relative to the working folder when inside it (what ``git apply`` expects)."""
    if path in ("-", "<stdin>"):
        return path
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


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
    results: Sequence[MigrationResult],
    failures: Sequence[str],
    stream: IO[str],
    color: bool,
    *,
    mode: str,
    quiet: bool = False,
) -> None:
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
    # One line each, however long: editors and grep read ``path:line:col: ...``.
    for failure in failures:
        console.print(Text(f"error: {failure}", style="bold red"), soft_wrap=True)
    console.print(summary(results, len(failures), mode), soft_wrap=True)


def summary(results: Sequence[MigrationResult], failed: int, mode: str) -> str:
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
    review = sum(len(r.needs_review) for r in results)
    if review:
        parts.append(f"{review} finding{'s' if review != 1 else ''} need review")
    if failed:
        parts.append(f"{failed} failed")
    return ", ".join(parts) + "."


def _width(stream: IO[str]) -> int | None:
    return None if getattr(stream, "isatty", lambda: False)() else 160
