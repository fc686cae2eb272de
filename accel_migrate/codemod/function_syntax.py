"""Facts of a function's own syntax, kept across one file's trees.

The loaders' ``tagged`` fixpoints ask, for each call of a local function, what
every ``return`` of it hands back (``index_syntax._returned_values``) and
whether it is a generator that repeats its first parameter's items
(``index_loaders.repeats_first``). Both answers are read off the
``FunctionDef``'s own subtree only: no scope, no name outside it, no other
statement. libcst's nodes are immutable and a rule's change rebuilds only the
nodes on its path (``fasttransform``), so a function no rule changed is the same
object on every later tree of the file, with the same answers. Each index of
the file's trees asks this memo (``RuleContext.function_syntax``), which
computes an answer the first time a ``FunctionDef`` object is asked about, and
returns the same answer (the same list) after that. A changed function is a
new object: a fresh answer.
"""

from __future__ import annotations

import libcst as cst

#: Keep the answers across trees (False: every index computes its own, as
#: before round 26; for comparisons).
REUSE = True


class FunctionSyntax:
    """One file's answers, by ``FunctionDef`` object (identity: libcst's nodes
    hash and compare by identity)."""

    __slots__ = ("_repeats", "_returned")

    def __init__(self) -> None:
        self._returned: dict[cst.FunctionDef, list[cst.BaseExpression | None]] = {}
        self._repeats: dict[cst.FunctionDef, bool] = {}

    def returned_values(
        self, function: cst.FunctionDef
    ) -> list[cst.BaseExpression | None]:
        """``_returned_values(function)``; the callers only read the list."""
        found = self._returned.get(function)
        if found is None:
            from .index_syntax import _returned_values

            found = _returned_values(function)
            if REUSE:
                self._returned[function] = found
        return found

    def repeats_first(self, function: cst.FunctionDef) -> bool:
        """``index_loaders.repeats_first(function)``."""
        found = self._repeats.get(function)
        if found is None:
            from .index_loaders import repeats_first

            found = repeats_first(function)
            if REUSE:
                self._repeats[function] = found
        return found
