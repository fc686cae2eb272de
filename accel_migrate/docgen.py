"""Generate docs/rules/ from the rules' docstrings: ``python -m accel_migrate.docgen``.

The docstring of a rule's module is its documentation; these pages are copies,
kept in the repository so that they can be read on a forge. A test fails when
they are stale.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from .codemod.other_codes import OTHER_CODES, OtherCode
from .codemod.rule import Rule, rules_by_code

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rules"


def page(rule: type[Rule] | OtherCode) -> str:
    doc = (rule.doc if isinstance(rule, OtherCode) else rule.doc()).strip()
    title, _, body = doc.partition("\n")
    return f"# {title.strip()}\n\n{body.strip()}\n"


def index(rules: list[type[Rule]]) -> str:
    lines = [
        "# Rules",
        "",
        "Generated from the rules' docstrings by `make docs`; do not edit by hand.",
        "",
        *_table("rewrites", rules),
        "",
        "Findings that come from no rule (selected and ignored like rule codes):",
        "",
        *_table("reports", OTHER_CODES),
    ]
    return "\n".join(lines) + "\n"


def _table(column: str, entries: Iterable[type[Rule] | OtherCode]) -> list[str]:
    """A table of codes: each links its page, with its name and summary."""
    lines = [f"| code | name | {column} |", "| --- | --- | --- |"]
    for entry in entries:
        summary = entry.summary.replace("|", "\\|")
        lines.append(f"| [{entry.code}]({entry.code}.md) | {entry.name} | {summary} |")
    return lines


def expected_pages() -> dict[str, str]:
    rules = rules_by_code()
    pages = {f"{rule.code}.md": page(rule) for rule in rules}
    pages.update({f"{other.code}.md": page(other) for other in OTHER_CODES})
    pages["README.md"] = index(rules)
    return pages


def main() -> int:
    DOCS.mkdir(parents=True, exist_ok=True)
    pages = expected_pages()
    for stale in DOCS.glob("*.md"):
        if stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        (DOCS / name).write_text(text)
    print(f"wrote {len(pages)} pages to {DOCS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
