"""Values read off the clock: ``time.time() - end``, or a variable computed from
one (``secs = int(time.time() - t0)``, then ``mins = secs / 60``), or a total
of them (``T = 0.0``, then ``T += time.time() - t0`` each epoch).

Each process's own reading is as right as the original's: a duration printed
(AM040's concern) or collected into a meter (``batch_time.update(time.time() -
end)``, AM009's) is no share of a batch, so neither is combined across processes
nor reported."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .analysis import variable_names
from .divergence import CLOCK_PREFIXES
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

#: Variables followed back from a value, at most (``a = f(t)``, ``b = a / 60``...).
_DEPTH = 4


def reads_clock(
    index: ModuleIndex,
    qualnames: Callable[[cst.CSTNode], set[str]],
    value: cst.BaseExpression,
) -> bool:
    """Is ``value`` read off the clock, directly or through the variables it is
    computed from?"""
    return _calls_clock(qualnames, value) or any(
        key_reads_clock(index, qualnames, index.key(name), set())
        for name in variable_names(value)
    )


def key_reads_clock(
    index: ModuleIndex,
    qualnames: Callable[[cst.CSTNode], set[str]],
    key: Key | None,
    seen: set[Key],
) -> bool:
    """Is a value assigned to ``key`` (or added to it: ``T += t1``) read off the
    clock, directly or through the variables it is computed from?"""
    if key is None or key in seen or len(seen) > _DEPTH:
        return False
    seen.add(key)
    increments = [a.value for a in index.augmented.get(key, ())]
    for value in (*index.values.get(key, ()), *increments):
        if value is None:
            continue
        if _calls_clock(qualnames, value):
            return True
        if any(
            key_reads_clock(index, qualnames, index.key(name), seen)
            for name in variable_names(value)
        ):
            return True
    return False


def _calls_clock(
    qualnames: Callable[[cst.CSTNode], set[str]], value: cst.CSTNode
) -> bool:
    for call in findall(value, m.Call()):
        if any(n.startswith(CLOCK_PREFIXES) for n in qualnames(call.func)):  # type: ignore[attr-defined]
            return True
    return False
