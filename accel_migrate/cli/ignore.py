"""gitignore-style patterns: ``.gitignore`` files and the ``exclude`` settings.

The syntax is git's (``*``, ``?``, ``[...]``, ``**``, a leading ``/`` or an inner
``/`` anchors a pattern to its base folder, a trailing ``/`` matches folders only,
``!`` re-includes, the last matching pattern wins, a deeper ``.gitignore`` wins over
a shallower one). A pattern is matched against one entry at a time, by its path
relative to the pattern's base folder; the walk prunes an ignored folder, so what
is inside it is ignored too, as in git.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    negated: bool
    folders_only: bool
    text: str


def compile_pattern(line: str) -> Pattern | None:
    """One gitignore line as a Pattern; None for blank lines and comments."""
    text = line.rstrip("\n").rstrip("\r")
    # Trailing spaces are ignored unless escaped with a backslash.
    stripped = text.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(text):
        stripped += " "
    text = stripped
    if not text or text.startswith("#"):
        return None
    negated = text.startswith("!")
    if negated:
        text = text[1:]
    elif text.startswith("\\!") or text.startswith("\\#"):
        text = text[1:]
    folders_only = text.endswith("/") and not text.endswith("\\/")
    if folders_only:
        text = text.rstrip("/")
    if not text:
        return None
    anchored = "/" in text
    body = text.lstrip("/") if anchored else text
    regex = _translate(body)
    if not anchored:
        regex = "(?:.*/)?" + regex
    return Pattern(
        re.compile(regex + r"\Z", re.DOTALL), negated, folders_only, line.strip()
    )


def _translate(glob: str) -> str:
    """A gitignore glob (without leading/trailing slash handling) as a regex."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if c == "*":
            stars = 1
            while i + stars < n and glob[i + stars] == "*":
                stars += 1
            at_start = i == 0 or glob[i - 1] == "/"
            at_end = i + stars == n or glob[i + stars] == "/"
            if stars >= 2 and at_start and at_end:
                if i + stars == n:  # "foo/**": everything inside
                    out.append(".*")
                    i += stars
                else:  # "**/foo" or "a/**/b": zero or more folders
                    out.append("(?:.*/)?")
                    i += stars + 1
                continue
            out.append("[^/]*")
            i += stars
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = i + 1
            if end < n and glob[end] in "!^":
                end += 1
            if end < n and glob[end] == "]":
                end += 1
            while end < n and glob[end] != "]":
                end += 1
            if end >= n:  # no closing bracket: a literal "["
                out.append(re.escape(c))
                i += 1
                continue
            inner = glob[i + 1 : end]
            if inner[:1] in ("!", "^"):
                inner = "^" + inner[1:]
            out.append("[" + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


class PatternSet:
    """Patterns that share a base folder (one .gitignore, or the exclude list)."""

    def __init__(self, base: str, lines: Iterable[str]) -> None:
        self.base = os.path.abspath(base)
        self.patterns = [p for p in map(compile_pattern, lines) if p is not None]

    @classmethod
    def from_file(cls, path: str) -> PatternSet | None:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return None
        patterns = cls(os.path.dirname(path), lines)
        return patterns if patterns.patterns else None

    def match(self, path: str, is_dir: bool) -> bool | None:
        """True: ignored; False: re-included by a ``!`` pattern; None: no pattern
        matches (or ``path`` is not under the base folder)."""
        relative = os.path.relpath(os.path.abspath(path), self.base)
        if relative == "." or relative.startswith(".." + os.sep) or relative == "..":
            return None
        relative = relative.replace(os.sep, "/")
        for pattern in reversed(self.patterns):
            if pattern.folders_only and not is_dir:
                continue
            if pattern.regex.match(relative):
                return not pattern.negated
        return None


def ignored(path: str, is_dir: bool, sets: Iterable[PatternSet]) -> bool:
    """Is ``path`` ignored by ``sets`` (given shallowest first; the deepest decides)?"""
    for patterns in reversed(list(sets)):
        verdict = patterns.match(path, is_dir)
        if verdict is not None:
            return verdict
    return False
