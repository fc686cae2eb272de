"""Map line numbers of a rewritten source back to the original source.

Rules run one after another, and the runtime import is added first, so a rule sees
line numbers shifted by earlier edits. Findings must name the user's lines.
"""

from __future__ import annotations

import difflib
from bisect import bisect_right


class LineMap:
    def __init__(self, original: str, current: str) -> None:
        matcher = difflib.SequenceMatcher(
            None, original.splitlines(), current.splitlines(), autojunk=False
        )
        # (first current line, first original line, block length, is_equal), 0-based.
        self._blocks: list[tuple[int, int, int, bool]] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if j2 > j1:
                self._blocks.append((j1, i1, max(i2 - i1, 1), tag == "equal"))
        self._starts = [block[0] for block in self._blocks]

    def original(self, line: int) -> int:
        """The 1-based original line for 1-based ``line`` of the current source."""
        where = bisect_right(self._starts, line - 1) - 1
        if where < 0:
            return line
        start, original_start, length, equal = self._blocks[where]
        offset = line - 1 - start
        return original_start + (offset if equal else min(offset, length - 1)) + 1
