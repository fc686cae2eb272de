"""Machine-readable reports: JSON for scripts, GitHub workflow annotations, SARIF
2.1.0 for code-scanning upload. And the run's summary counts, which every format
(and the text report in render.py) shares.

Findings are data; this module and render.py are the only ones that turn them
into text.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..codemod.findings import Failure, Finding, MigrationResult

Outcome = MigrationResult | Failure

FORMATS = ("text", "json", "github", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/accel-migrate/accel-migrate"


def display_path(path: str) -> str:
    """How every report names a file: relative to the working folder when inside it
    (what ``git apply`` expects), else as given; normalised (``./a/../b.py`` and
    ``b.py`` are one name), so that diffs, findings, errors and summaries agree."""
    if path in ("-", "<stdin>"):
        return path
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return os.path.normpath(path)
    return os.path.normpath(path) if relative.startswith("..") else relative


@dataclass
class Report:
    """One run: every file's outcome, in the order the files were found."""

    mode: str
    outcomes: list[Outcome] = field(default_factory=list)
    #: Unified diffs of changed files, by position in ``outcomes`` (with --diff).
    diffs: dict[int, str] = field(default_factory=dict)
    exit_code: int = 0

    @property
    def results(self) -> list[MigrationResult]:
        return [o for o in self.outcomes if isinstance(o, MigrationResult)]

    @property
    def failures(self) -> list[Failure]:
        return [o for o in self.outcomes if isinstance(o, Failure)]


@dataclass(frozen=True)
class Summary:
    scanned: int
    changed: int
    unchanged: int
    skipped: dict[str, int]
    failed: int
    #: fixed findings per rule code
    rewrites: dict[str, int]
    #: (path, finding) for every needs-review finding
    review: list[tuple[str, Finding]]
    #: statements left alone by ``# accel-migrate: skip``
    suppressed: int

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())


def summarize(outcomes: Sequence[Outcome]) -> Summary:
    results = [o for o in outcomes if isinstance(o, MigrationResult)]
    statuses = Counter(r.status for r in results)
    skipped = Counter(r.skip_reason for r in results if r.skip_reason)
    rewrites = Counter(
        f.code for r in results for f in r.findings if f.status == "fixed"
    )
    return Summary(
        scanned=len(outcomes),
        changed=statuses["changed"],
        unchanged=statuses["unchanged"],
        skipped=dict(sorted(skipped.items())),
        failed=len(outcomes) - len(results),
        rewrites=dict(sorted(rewrites.items())),
        review=[(r.path, f) for r in results for f in r.needs_review],
        suppressed=sum(len(r.suppressed) for r in results),
    )


def rule_names() -> dict[str, tuple[str, str]]:
    """code -> (name, summary) for every registered rule and the screen."""
    from ..codemod.other_codes import OTHER_CODES
    from ..codemod.rule import registered_rules

    names = {rule.code: (rule.name, rule.summary) for rule in registered_rules()}
    for other in OTHER_CODES:
        names[other.code] = (other.name, other.summary)
    return names


def rule_docs() -> dict[str, str]:
    """code -> the rule page's markdown (docs/rules/CODE.md), for every code."""
    from ..codemod.other_codes import OTHER_CODES
    from ..codemod.rule import registered_rules
    from ..docgen import page

    docs = {rule.code: page(rule) for rule in registered_rules()}
    docs.update({other.code: page(other) for other in OTHER_CODES})
    return docs


def _what(doc: str) -> str:
    """The first paragraph of a page's "What" section (SARIF's fullDescription)."""
    _, _, rest = doc.partition("## What\n")
    paragraph = rest.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split()) or doc.partition("\n")[0].lstrip("# ")


# -- JSON ------------------------------------------------------------------------------


def _finding_json(finding: Finding, names: dict[str, tuple[str, str]]) -> dict:
    return {
        "line": finding.line,
        "column": finding.column,
        "code": finding.code,
        "rule": names.get(finding.code, (finding.code, ""))[0],
        "status": finding.status,
        "message": finding.message,
    }


def to_json(report: Report) -> str:
    names = rule_names()
    files = []
    for index, outcome in enumerate(report.outcomes):
        if isinstance(outcome, Failure):
            files.append(
                {
                    "path": display_path(outcome.path),
                    "status": "failed",
                    "error": {
                        "line": outcome.line,
                        "column": outcome.column,
                        "message": outcome.message,
                    },
                    "findings": [],
                }
            )
            continue
        entry: dict[str, object] = {
            "path": display_path(outcome.path),
            "status": outcome.status,
            "skip_reason": outcome.skip_reason,
            "findings": [_finding_json(f, names) for f in outcome.findings],
            "suppressed_lines": list(outcome.suppressed),
            # What each of suppressed_lines was left alone by ("every rule", "AM008").
            "suppressed_rules": list(outcome.suppressed_rules),
        }
        if index in report.diffs:
            entry["diff"] = report.diffs[index]
        files.append(entry)
    summary = summarize(report.outcomes)
    document = {
        "tool": "accel-migrate",
        "version": __version__,
        "mode": report.mode,
        "exit_code": report.exit_code,
        "summary": {
            "scanned": summary.scanned,
            "changed": summary.changed,
            "unchanged": summary.unchanged,
            "skipped": summary.skipped_total,
            "skipped_by_reason": summary.skipped,
            "failed": summary.failed,
            "rewrites_by_rule": summary.rewrites,
            "needs_review": len(summary.review),
            "suppressed_statements": summary.suppressed,
        },
        "files": files,
    }
    return json.dumps(document, indent=2) + "\n"


# -- GitHub workflow commands ---------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(
    kind: str, path: str, line: int, column: int, title: str, text: str
) -> str:
    properties = ",".join(
        [
            f"file={_escape_property(display_path(path).replace(os.sep, '/'))}",
            f"line={line}",
            f"col={column}",
            f"title={_escape_property(title)}",
        ]
    )
    return f"::{kind} {properties}::{_escape_data(text)}\n"


#: finding status -> annotation level
_GITHUB_LEVEL = {"fixed": "notice", "needs-review": "warning", "info": "notice"}


def to_github(report: Report) -> str:
    """One ``::notice|warning|error`` workflow command per finding and failure."""
    lines = []
    verb = "rewritten" if report.mode == "write" else "would be rewritten"
    for outcome in report.outcomes:
        if isinstance(outcome, Failure):
            lines.append(
                _command(
                    "error",
                    outcome.path,
                    outcome.line,
                    outcome.column,
                    "accel-migrate: file not processed",
                    outcome.message,
                )
            )
            continue
        for finding in outcome.findings:
            status = verb if finding.status == "fixed" else finding.status
            lines.append(
                _command(
                    _GITHUB_LEVEL[finding.status],
                    outcome.path,
                    finding.line,
                    finding.column,
                    f"accel-migrate {finding.code} ({status})",
                    finding.message,
                )
            )
    return "".join(lines)


# -- SARIF 2.1.0 -----------------------------------------------------------------------

#: finding status -> SARIF result level
_SARIF_LEVEL = {"fixed": "note", "needs-review": "warning", "info": "note"}


def _artifact(path: str) -> dict:
    shown = display_path(path)
    if os.path.isabs(shown):
        return {"uri": Path(shown).as_uri()}
    return {"uri": shown.replace(os.sep, "/"), "uriBaseId": "%SRCROOT%"}


def _location(path: str, line: int, column: int) -> dict:
    return {
        "physicalLocation": {
            "artifactLocation": _artifact(path),
            "region": {"startLine": max(line, 1), "startColumn": max(column, 1)},
        }
    }


#: The SARIF rule of the files that could not be processed (exit 123): a result
#: each, so that code scanning shows them (a tool notification alone is only on the
#: run's status page), as well as a notification (the run did not fully succeed).
FAILED_RULE = {
    "id": "not-processed",
    "name": "file-not-processed",
    "shortDescription": {"text": "the file could not be read, parsed or migrated"},
    "fullDescription": {
        "text": "accel-migrate could not process this file (it does not parse, "
        "cannot be read or decoded, or the migration failed); it was left unchanged "
        "and the run exits 123."
    },
    "help": {
        "text": "Fix the file so that Python parses it, or report the error: "
        "nothing in it was migrated.",
        "markdown": "Fix the file so that Python parses it, or report the error: "
        "nothing in it was migrated. See the exit codes in the "
        f"[user guide]({INFORMATION_URI}/blob/main/docs/user-guide.md).",
    },
    "helpUri": f"{INFORMATION_URI}/blob/main/docs/user-guide.md",
    "defaultConfiguration": {"level": "error"},
}


def to_sarif(report: Report) -> str:
    names = rule_names()
    docs = rule_docs()
    used = sorted(set(names) | {f.code for r in report.results for f in r.findings})
    rules = []
    for code in used:
        name, summary = names.get(code, (code, code))
        doc = docs.get(code, "")
        uri = f"{INFORMATION_URI}/blob/main/docs/rules/{code}.md"
        rules.append(
            {
                "id": code,
                "name": name,
                "shortDescription": {"text": summary or name},
                "fullDescription": {"text": _what(doc) if doc else summary or name},
                "help": {
                    "text": f"{code} {name}: {summary}. The rule's page: {uri}",
                    "markdown": doc or summary or name,
                },
                "helpUri": uri,
                "defaultConfiguration": {"level": "warning"},
            }
        )
    rules.append(FAILED_RULE)
    index = {rule["id"]: n for n, rule in enumerate(rules)}
    results = []
    for outcome in report.results:
        for finding in outcome.findings:
            results.append(
                {
                    "ruleId": finding.code,
                    "ruleIndex": index[finding.code],
                    "level": _SARIF_LEVEL[finding.status],
                    "kind": "review" if finding.status == "needs-review" else "fail",
                    "message": {"text": finding.message},
                    "locations": [
                        _location(outcome.path, finding.line, finding.column)
                    ],
                    "properties": {"status": finding.status},
                }
            )
    for failure in report.failures:
        results.append(
            {
                "ruleId": FAILED_RULE["id"],
                "ruleIndex": index[FAILED_RULE["id"]],
                "level": "error",
                "kind": "fail",
                "message": {"text": failure.message},
                "locations": [_location(failure.path, failure.line, failure.column)],
                "properties": {"status": "failed"},
            }
        )
    notifications = [
        {
            "level": "error",
            "message": {"text": failure.message},
            "locations": [_location(failure.path, failure.line, failure.column)],
        }
        for failure in report.failures
    ]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "accel-migrate",
                        "version": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "invocations": [
                    {
                        "executionSuccessful": not report.failures,
                        "exitCode": report.exit_code,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"
