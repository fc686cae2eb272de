"""Map line numbers of a rewritten source back to the original source.

Rules run one after another, and the runtime import is added first, so a rule sees
line numbers shifted by earlier edits. Findings must name the user's lines.
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
        where = bisect_right(self._starts, line - 1) - 1
        if where < 0:
            return line
        start, original_start, length, original_length, equal = self._blocks[where]
        offset = line - 1 - start
        if equal or length == original_length or original_length <= 1:
            # line for line (``print`` -> ``accel.print``), or nothing to choose from
            return original_start + min(offset, max(original_length - 1, 0)) + 1
        # A rule merged or split lines (``with open(p) as f: torch.save(x, f)`` became
        # ``accel.save(x, p)``): the original line of the block most like this one.
        text = self._current[line - 1] if line - 1 < len(self._current) else ""
        candidates = range(original_start, original_start + original_length)
        best = max(
            candidates,
            key=lambda i: (_likeness(self._original[i], text), -i),
        )
        return best + 1


def _likeness(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()
