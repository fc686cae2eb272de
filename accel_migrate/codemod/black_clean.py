"""Files that black would surely change, told without running black.

``black_like_input`` formats a migrated file only when its input was black-clean,
and finding that out cost a whole black run of the input: a tenth of a second
for a 200-line script, a sixth of a full pass over a tree of training scripts
(docs/performance.md, "round 13"), nearly always to learn that it was not (most
training scripts are not black-formatted). One token walk finds most of those:

- a one-line string literal in single quotes with neither a double quote nor a
  backslash in its body: black's string normalisation writes it with double
  quotes (``'abc'``, ``b'x'``, ``r'a.b'``, ``''``);
- a comment without a space after its ``#`` (``#comment``, not ``#!`` on the
  first line, nor ``#:``): black adds one;
- a block indented otherwise than by four spaces a level: black re-indents it;
- a line too long in a simple statement (a call, an assignment) that black
  wraps: that statement alone is given to black, dedented, with the line
  length less its indentation (black measures a line with its indentation, four
  spaces a level, and decides each statement's lines from that statement
  alone), which costs a few milliseconds where the file costs a hundred.

Each is a change black always makes (with string normalisation on, for the
first), so a file that has one is not black-clean. A file with a ``fmt:``
directive anywhere, or that does not tokenize, is left to black itself. A file
this finds nothing in may still not be black-clean: black decides.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import replace
from typing import Any

from . import python_ast


def surely_not_black_clean(text: str, mode: Any) -> bool:
    """Would black (in ``mode``, a ``black.Mode``) surely change ``text``?
    (False: black must be asked.)"""
    if "fmt:" in text:
        return False  # `# fmt: off`, `# fmt: skip`: black leaves code as it is
    levels = [0]
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING:
                if mode.string_normalization and _single_quoted(token.string):
                    return True
            elif token.type == tokenize.COMMENT and _unspaced(token):
                return True
            elif token.type == tokenize.INDENT:
                if token.string != " " * (levels[-1] + 4):
                    return True
                levels.append(len(token.string))
            elif token.type == tokenize.DEDENT:
                levels.pop()
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    return _wrapped_statement(text, mode)


def _wrapped_statement(text: str, mode: Any) -> bool:
    """Does black rewrite a simple statement that holds a line too long?"""
    import black

    lines = text.splitlines()
    length = mode.line_length
    if not any(len(line) > length for line in lines):
        return False
    try:
        tree = python_ast.parse(text)
    except SyntaxError:
        return False
    tried = 0
    for node in ast.walk(tree):
        if not isinstance(node, _SIMPLE) or node.end_lineno is None:
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring, whose layout depends on where it is
        span = lines[node.lineno - 1 : node.end_lineno]
        if not any(len(line) > length for line in span):
            continue
        segment = _alone(span, node)
        if segment is None:
            continue
        indent = len(span[0]) - len(span[0].lstrip(" "))
        if length - indent < 20 or tried == _TRIES:
            continue
        tried += 1
        try:
            formatted = black.format_str(
                segment, mode=replace(mode, line_length=length - indent)
            )
        except Exception:  # black cannot format it alone: it decides for the file
            continue
        if formatted.rstrip("\n") != segment.rstrip("\n"):
            return True
    return False


def _alone(span: list[str], node: ast.stmt) -> str | None:
    """The statement's lines dedented, where they hold it alone (no `;`, no
    other statement, no line less indented than its first); None otherwise."""
    first = span[0]
    indent = len(first) - len(first.lstrip(" "))
    if node.col_offset != indent or "\t" in first[:indent] or ";" in "".join(span):
        return None
    if any(
        line.strip() and len(line) - len(line.lstrip(" ")) < indent for line in span
    ):
        return None
    return "\n".join(line[indent:] for line in span) + "\n"


#: Statements black lays out from their own tokens alone.
_SIMPLE = (
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Return,
    ast.Raise,
    ast.Assert,
    ast.Delete,
    ast.Import,
    ast.ImportFrom,
)
#: Statements given to black alone, at most (each costs a few milliseconds).
_TRIES = 8


def _single_quoted(literal: str) -> bool:
    """``'abc'`` (any prefix): one line, single quotes, no ``"`` or ``\\`` inside."""
    body = literal.lstrip("rRbBuUfF")
    if (
        len(literal) - len(body) > 2
        or "f" in literal[: len(literal) - len(body)].lower()
    ):
        return False  # f-strings: black leaves their quotes alone in some versions
    if len(body) < 2 or body[0] != "'" or body.startswith("'''"):
        return False
    inner = body[1:-1]
    return '"' not in inner and "\\" not in inner and "\n" not in inner


def _unspaced(token: tokenize.TokenInfo) -> bool:
    """``#comment``: black writes ``# comment`` (not a shebang, ``#!`` on line 1,
    nor a ``#:`` comment, which black keeps as they are)."""
    comment = token.string
    if len(comment) < 2 or comment[1] in " #!:":
        return False
    return not (token.start[0] == 1 and comment.startswith("#!"))
