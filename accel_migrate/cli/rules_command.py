"""``accel-migrate rules [CODE]``: the rule catalogue from the rules' own docstrings."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from ..codemod.other_codes import OTHER_CODES
from ..codemod.rule import rules_by_code
from .app import EXIT_OK, EXIT_USAGE


def run_rules(code: str | None) -> int:
    console = Console()
    if console.is_terminal:
        return _run_rules(console, code)
    # Piped or redirected: rich pads each line of a page (lists, code blocks) with
    # spaces to its width; a pipe gets the same lines without the padding.
    with console.capture() as captured:
        status = _run_rules(console, code)
    lines = captured.get().splitlines()
    sys.stdout.write("".join(f"{line.rstrip()}\n" for line in lines))
    return status


def _run_rules(console: Console, code: str | None) -> int:
    rules = rules_by_code()
    if code is None:
        table = Table(title="accel-migrate rules", title_justify="left")
        table.add_column("code")
        table.add_column("name")
        table.add_column("rewrites")
        for rule in rules:
            table.add_row(rule.code, rule.name, rule.summary)
        for other in OTHER_CODES:
            table.add_row(other.code, other.name, other.summary)
        console.print(table)
        return EXIT_OK
    wanted = code.upper()
    for rule in rules:
        if wanted in (rule.code, rule.name.upper()):
            console.print(Markdown(rule.doc()))
            return EXIT_OK
    for other in OTHER_CODES:
        if wanted in (other.code, other.name.upper()):
            console.print(Markdown(other.doc))
            return EXIT_OK
    from .codes import suggestion

    choices = [r.code for r in rules] + [o.code for o in OTHER_CODES]
    choices += [r.name for r in rules] + [o.name for o in OTHER_CODES]
    near = suggestion(code, choices)
    hint = f" (did you mean {near}?)" if near else ""
    print(
        f"error: no rule {code!r}{hint}; `accel-migrate rules` lists them",
        file=sys.stderr,
    )
    return EXIT_USAGE
