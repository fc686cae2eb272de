"""Findings and per-file results: plain data. Rules produce them; only the CLI renders."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["fixed", "needs-review", "info"]
FileStatus = Literal["changed", "unchanged", "skipped", "failed"]


@dataclass(frozen=True, order=True)
class Finding:
    """One thing a rule did or could not do, at a place in the original file."""

    line: int
    column: int
    code: str
    status: Status
    message: str

    def format(self, path: str) -> str:
        return f"{path}:{self.line}:{self.column}: {self.code} [{self.status}] {self.message}"


@dataclass(frozen=True)
class MigrationResult:
    """What migrating one source did. ``output`` equals ``source`` unless changed."""

    path: str
    source: str | bytes
    output: str | bytes
    findings: tuple[Finding, ...] = ()
    #: Why the file was left alone as a whole ("already distributed", ...), if it was.
    skip_reason: str | None = None
    #: First lines of the statements left alone because of ``# accel-migrate: skip``.
    suppressed: tuple[int, ...] = ()
    #: For each of ``suppressed``: the rules it was left alone for ("every rule",
    #: or "AM010, AM011"). Empty when not known (a result made elsewhere).
    suppressed_rules: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return self.output != self.source

    @property
    def status(self) -> FileStatus:
        if self.skip_reason is not None:
            return "skipped"
        return "changed" if self.changed else "unchanged"

    @property
    def needs_review(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.status == "needs-review")


#: Why a whole file is left alone (``MigrationResult.skip_reason``).
SKIP_NOT_TRAINING = "not a training entry point"
SKIP_DISTRIBUTED = "already distributed"
SKIP_SUPPRESSED = "suppressed"
SKIP_GENERATED = "generated"


@dataclass(frozen=True)
class Failure:
    """A file that could not be processed: where, and why, in one line."""

    path: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.message}"


@dataclass(frozen=True)
class MigrationError(Exception):
    """A file that could not be migrated, with the place to look at."""

    path: str
    line: int
    column: int
    message: str
    notes: tuple[str, ...] = field(default=())

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.message}"

    def failure(self) -> Failure:
        return Failure(self.path, self.line, self.column, self.message)
