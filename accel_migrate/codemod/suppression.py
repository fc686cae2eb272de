"""``# accel-migrate: skip`` comments: what they say, and whether each one did anything.

``# accel-migrate: skip`` leaves a statement alone for every rule;
``# accel-migrate: skip[AM010, AM011]`` for those rules only (a code may be a
prefix, as in ``--ignore``). Which statement a comment marks is rule.py's
business (``suppressed_statements``); this module parses the comments and, after
a migration, reports with code AM101 (as ruff's RUF100 does for ``noqa``):

- a comment that marks no statement (on a line of its own, above the statement);
- a code in the brackets that names no rule (the user's intent is not honoured);
- a suppression that suppressed nothing: migrating the file without it gives no
  finding (and so no rewrite) for those rules inside that statement.

The last needs a second migration of the file with suppressions off; it is done
only for files that hold such a comment, so other files pay nothing.
"""

from __future__ import annotations

import dataclasses
import io
import re
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import libcst as cst

from .findings import Finding, MigrationResult
from .other_codes import OTHER_CODES, UNUSED_SUPPRESSION

#: The code of the findings about suppression comments.
UNUSED_CODE = UNUSED_SUPPRESSION.code

#: ``# accel-migrate: skip`` (not ``skip-file``), alone or after other comment text.
SKIP_COMMENT = re.compile(r"accel-migrate:[ \t]*skip(?![-\w])")
_DIRECTIVE = re.compile(r"accel-migrate:[ \t]*skip(?![-\w])(?:\[([^\]]*)\])?")

#: What a statement is suppressed for: None is every rule.
Codes = frozenset[str] | None


@dataclass(frozen=True)
class Directive:
    """One ``accel-migrate: skip`` in a comment."""

    #: None: every rule; else the codes in the brackets (upper case).
    codes: Codes
    #: Where it starts in the comment (0-based).
    offset: int
    #: The text as written (``skip[AM010]``), for messages.
    text: str


def parse(comment: str) -> Directive | None:
    """The first directive in ``comment``, if any."""
    found = _DIRECTIVE.search(comment)
    if found is None:
        return None
    inside = found.group(1)
    codes = (
        None
        if inside is None
        else frozenset(c.strip().upper() for c in inside.split(",") if c.strip())
    )
    return Directive(codes, found.start(), found.group(0))


def merge(first: Codes, second: Codes) -> Codes:
    """Two comments on one statement: what either suppresses."""
    if first is None or second is None:
        return None
    return first | second


def applies(codes: Codes, code: str) -> bool:
    """Does a suppression for ``codes`` cover rule ``code``?"""
    return codes is None or any(code.startswith(c) for c in codes)


def describe(codes: Codes) -> str:
    return "every rule" if codes is None else ", ".join(sorted(codes)) or "no rule"


@dataclass(frozen=True)
class Comment:
    line: int
    #: 1-based column of the directive.
    column: int
    directive: Directive


def comments(text: str) -> list[Comment]:
    """Every directive in a comment (never in a string) of ``text``."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                directive = parse(token.string)
                if directive is not None:
                    line, column = token.start
                    found.append(
                        Comment(line, column + directive.offset + 1, directive)
                    )
    except (tokenize.TokenError, SyntaxError):
        return found
    return found


@dataclass(frozen=True)
class Marked:
    """A statement that a comment marks: its original lines and what it skips."""

    first: int
    last: int
    codes: Codes


def review(
    result: MigrationResult,
    text: str,
    options: Any,
    *,
    module: Callable[[], cst.Module],
    migrate: Callable[[Any], MigrationResult],
) -> MigrationResult:
    """After the engine's full pass over a file with a skip comment: what each
    suppression skipped, and AM101 for those that did nothing. ``options`` are the
    engine's MigrateOptions; ``migrate(options)`` runs the full pass again (with
    suppressions off, to tell which did something); ``module()`` parses the file."""
    from .rule import registered_rules

    if result.skip_reason is not None:
        return result
    report = options.selected(UNUSED_CODE)
    known = frozenset(
        {r.code for r in registered_rules()} | {o.code for o in OTHER_CODES}
    )
    return check(
        result,
        text,
        marked_statements(module()),
        known,
        report=report,
        selected=options.selected,
        rerun=(
            (lambda: migrate(replace(options, honour_suppressions=False)))
            if report
            else None
        ),
    )


def check(
    result: MigrationResult,
    text: str,
    marked: list[Marked],
    known: frozenset[str],
    *,
    report: bool,
    rerun: Callable[[], MigrationResult] | None,
    selected: Callable[[str], bool] = lambda code: True,
) -> MigrationResult:
    """``result`` with AM101 findings (``report``) and ``suppressed_rules`` filled in.

    ``rerun`` migrates the same file with suppressions off (None: unused
    suppressions are not looked for)."""
    rules = {m.first: describe(m.codes) for m in marked}
    suppressed_rules = tuple(
        rules.get(line, "every rule") for line in result.suppressed
    )
    result = replace(result, suppressed_rules=suppressed_rules)
    if not report:
        return result
    found = comments(text)
    if not found:
        return result
    new: list[Finding] = []
    unmarked: list[Comment] = []
    owners: dict[Comment, Marked] = {}
    for comment in found:
        owner = _innermost(comment.line, marked)
        if owner is None:
            unmarked.append(comment)
        else:
            owners[comment] = owner
        codes = comment.directive.codes
        for code in sorted(codes or ()):
            if not any(k.startswith(code) for k in known):
                new.append(
                    _finding(
                        comment,
                        "needs-review",
                        f"{code} in `{comment.directive.text}` is not a rule code"
                        f"{_near(code, known)}: that rule is not suppressed here",
                    )
                )
        if codes is not None and not codes:
            new.append(
                _finding(comment, "info", f"`{comment.directive.text}` names no rule")
            )
    for comment in unmarked:
        new.append(
            _finding(
                comment,
                "info",
                "this suppression marks no statement: write it at the end of a line "
                "of the statement (of a compound statement's header), not above it",
            )
        )
    if rerun is not None and owners:
        new.extend(_unused(owners, rerun(), known, selected))
    if not new:
        return result
    return replace(result, findings=tuple(sorted((*result.findings, *new))))


def _unused(
    owners: dict[Comment, Marked],
    rerun: MigrationResult,
    known: frozenset[str],
    selected: Callable[[str], bool],
) -> list[Finding]:
    if rerun.skip_reason is not None:
        return []
    if not rerun.changed and rerun.needs_review:
        # Left unchanged whole (a blocking finding): its rewrites were dropped from
        # the findings, so "nothing to suppress" cannot be told. Say nothing.
        return []
    unused = []
    for comment, owner in owners.items():
        codes = comment.directive.codes
        if codes is not None:
            codes = frozenset(c for c in codes if any(k.startswith(c) for k in known))
            if not codes:
                continue  # no rule named: reported already
        used = any(
            owner.first <= f.line <= owner.last
            and applies(codes, f.code)
            and f.code != UNUSED_CODE
            for f in rerun.findings
        )
        off = codes is not None and not any(
            selected(k) for k in known if applies(codes, k)
        )
        if not used and off:
            unused.append(
                _finding(
                    comment,
                    "info",
                    f"unused suppression: {describe(codes)} does not run on this file "
                    "(--select, --ignore, per-file-ignores)",
                )
            )
        elif not used:
            who = (
                "no rule would rewrite or report"
                if codes is None
                else f"{describe(codes)} would neither rewrite nor report"
            )
            where = (
                f"this statement (lines {owner.first}-{owner.last})"
                if owner.first != owner.last
                else "this statement"
            )
            unused.append(
                _finding(
                    comment,
                    "info",
                    f"unused suppression: {who} anything in {where}",
                )
            )
    return unused


def _innermost(line: int, marked: Iterable[Marked]) -> Marked | None:
    around = [m for m in marked if m.first <= line <= m.last]
    return min(around, key=lambda m: m.last - m.first, default=None)


def _near(code: str, known: frozenset[str]) -> str:
    close = nearest(code, known)
    return f" (did you mean {close}?)" if close else ""


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice fewest edits away from ``word`` (at most 2, or a third of it)."""
    best: tuple[int, str] | None = None
    for choice in sorted(choices):
        distance = _edits(word.upper(), choice.upper())
        if best is None or distance < best[0]:
            best = (distance, choice)
    if best is None or best[0] > max(2, len(word) // 3):
        return None
    return best[1]


def _edits(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y))
            )
        previous = current
    return previous[-1]


def _finding(comment: Comment, status: str, message: str) -> Finding:
    return Finding(comment.line, comment.column, UNUSED_CODE, status, message)  # type: ignore[arg-type]


# -- which statement a comment marks ---------------------------------------------------

#: Fields of compound statements that hold nested statements, not the header.
_NOT_HEADER = frozenset(
    {
        "body",
        "orelse",
        "handlers",
        "finalbody",
        "cases",
        "leading_lines",
        "lines_after_decorators",
        "footer",
    }
)


def suppressed_statements(module: cst.Module) -> dict[int, Codes]:
    """``id()`` of the statements marked ``# accel-migrate: skip``, with what each
    skips: a simple statement with the comment on any of its lines, a compound
    statement (with its body) with the comment on its header, an
    ``else``/``except``/``finally``/``case`` clause with the comment on its own
    header."""
    finder = _Suppressions()
    module.visit(finder)
    return {id(node): codes for node, codes in finder.found}


def marked_statements(module: cst.Module) -> list[Marked]:
    """The statements of ``module`` that a comment marks, with their lines."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    finder = _Suppressions()
    wrapper.module.visit(finder)
    if not finder.found:
        return []
    positions = wrapper.resolve(PositionProvider)
    return [
        Marked(positions[node].start.line, positions[node].end.line, codes)
        for node, codes in finder.found
        if node in positions
    ]


class _Suppressions(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[cst.CSTNode, Codes]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, cst.SimpleStatementLine):
            marks = _marks(node.body) + _marks(node.trailing_whitespace)
            if marks:
                self.found.append((node, _union(marks)))
            return False
        body = getattr(node, "body", None)
        if isinstance(body, cst.BaseSuite) and not isinstance(node, cst.Module):
            marks = _header_marks(node, body)
            if marks:
                self.found.append((node, _union(marks)))
                return False
        return True


def _union(marks: list[Directive]) -> Codes:
    codes: Codes = marks[0].codes
    for mark in marks[1:]:
        codes = merge(codes, mark.codes)
    return codes


def _header_marks(node: cst.CSTNode, body: cst.BaseSuite) -> list[Directive]:
    marks = _marks(body) if isinstance(body, cst.SimpleStatementSuite) else []
    if not isinstance(body, cst.SimpleStatementSuite):  # `if x: y  # ...`: one line
        marks = _marks(body.header)
    for f in dataclasses.fields(node):
        if f.name not in _NOT_HEADER:
            marks += _marks(getattr(node, f.name))
    return marks


def _marks(value: object) -> list[Directive]:
    nodes = value if isinstance(value, (list, tuple)) else [value]
    found: list[Directive] = []
    for node in nodes:
        if not isinstance(node, cst.CSTNode):
            continue
        texts = [node.value] if isinstance(node, cst.Comment) else _comments(node)
        for text in texts:
            directive = parse(text) if SKIP_COMMENT.search(text) else None
            if directive is not None:
                found.append(directive)
    return found


def _comments(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class _Collect(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(comment.value)

    node.visit(_Collect())
    return found
