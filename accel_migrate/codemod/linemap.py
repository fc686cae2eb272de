"""Map places in a rewritten source back to the original source.

Rules run one after another, so a rule sees lines shifted and lines rewritten by
earlier edits (``print(x.cuda())`` is ``accel.print(x.cuda())`` by the time another
rule looks at ``x.cuda()``). Findings must name the user's lines and columns.
"""

from __future__ import annotations

import difflib
from bisect import bisect_right

from .source import NEWLINE


class LineMap:
    def __init__(self, original: str, current: str) -> None:
        self._original = NEWLINE.split(original)
        self._current = NEWLINE.split(current)
        matcher = difflib.SequenceMatcher(
            None, self._original, self._current, autojunk=False
        )
        # (first current line, first original line, current length, original
        # length, is_equal), 0-based.
        self._blocks: list[tuple[int, int, int, int, bool]] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if j2 > j1:
                self._blocks.append((j1, i1, j2 - j1, i2 - i1, tag == "equal"))
        self._starts = [block[0] for block in self._blocks]

    def original(self, line: int) -> int:
        """The 1-based original line for 1-based ``line`` of the current source."""
        return self._original_index(line) + 1

    def original_place(self, line: int, column: int) -> tuple[int, int]:
        """The original (1-based line, 0-based column) for a place in the current
        source: the column moves with the text around it, so a call that an edit
        before it on the same line shifted is named where the user wrote it."""
        index = self._original_index(line)
        current = self._current[line - 1] if 0 < line <= len(self._current) else ""
        original = self._original[index] if index < len(self._original) else ""
        return index + 1, _original_column(original, current, column)

    def _original_index(self, line: int) -> int:
        where = bisect_right(self._starts, line - 1) - 1
        if where < 0:
            return line - 1
        start, original_start, length, original_length, equal = self._blocks[where]
        offset = line - 1 - start
        if equal or length == original_length or original_length <= 1:
            # line for line (``print`` -> ``accel.print``), or nothing to choose from
            return original_start + min(offset, max(original_length - 1, 0))
        # A rule merged or split lines (``with open(p) as f: torch.save(x, f)`` became
        # ``accel.save(x, p)``): the original line of the block most like this one.
        text = self._current[line - 1] if line - 1 < len(self._current) else ""
        candidates = range(original_start, original_start + original_length)
        best = max(
            candidates,
            key=lambda i: (_likeness(self._original[i], text), -i),
        )
        return best


def _original_column(original: str, current: str, column: int) -> int:
    if original == current or column <= 0:
        return column
    matcher = difflib.SequenceMatcher(None, original, current, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        if b <= column < b + size:
            return a + column - b
        if b > column:
            # The column is in text an edit wrote: the place where that edit starts.
            return a
    return len(original)


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()
