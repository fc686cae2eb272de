"""Rule codes on the command line and in ``[tool.accel-migrate]``: checked against
the codes that exist, and ``per-file-ignores``.

A code may be a prefix (``AM01`` selects AM010-AM019), as in ruff; a code or
prefix that matches no rule is a usage error: a typo in ``--select`` or
``--ignore`` would otherwise turn a CI check into a check of nothing.

Light at import: the rules are imported only when the known codes are asked for
(``--help`` does not pay for them).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .config import ConfigError


@lru_cache(maxsize=1)
def known_codes() -> frozenset[str]:
    """Every code a finding can carry: the rules', the screen's, the suppressions'."""
    from ..codemod.other_codes import OTHER_CODES
    from ..codemod.rule import registered_rules

    return frozenset(
        {rule.code for rule in registered_rules()} | {o.code for o in OTHER_CODES}
    )


def matches(code: str, known: Iterable[str]) -> bool:
    return any(k.startswith(code) for k in known)


def suggestion(code: str, known: Iterable[str]) -> str | None:
    """The known code closest to ``code`` (a typo of one or two characters)."""
    from ..codemod.suppression import nearest

    return nearest(code, known)


def unknown_message(code: str, known: Iterable[str]) -> str:
    """``AM999 is not a rule code (did you mean AM009?)``."""
    near = suggestion(code, known)
    hint = f" (did you mean {near}?)" if near else ""
    return f"{code} is not a rule code{hint}; `accel-migrate rules` lists them"


def check(codes: Iterable[str] | None, where: str, known: frozenset[str]) -> None:
    """Raise ConfigError, one line naming ``where`` and the first bad code."""
    for code in sorted(codes or ()):
        if not matches(code, known):
            raise ConfigError(f"{where}: {unknown_message(code, known)}")


@dataclass(frozen=True)
class PerFileIgnores:
    """``[tool.accel-migrate.per-file-ignores]``: gitignore-style glob -> codes.

    A pattern is matched (by ignore.py, as ``exclude`` patterns are) against the
    file's path relative to the folder of the configuration file, and against each
    folder above it: ``"legacy/"`` covers the files inside; a pattern without a
    slash matches a name anywhere below (``"test_*.py"``), as in ruff and git.
    """

    base: Path
    entries: tuple[tuple[str, frozenset[str]], ...] = ()

    def codes_for(self, path: str) -> frozenset[str]:
        if not self.entries:
            return frozenset()
        from .ignore import PatternSet

        absolute = Path(os.path.abspath(path))
        try:
            parts = absolute.relative_to(self.base).parts
        except ValueError:
            return frozenset()  # outside the project the table belongs to
        # The file, or a folder above it: "legacy/" covers what is inside.
        entries = [
            (str(self.base.joinpath(*parts[:n])), n < len(parts))
            for n in range(1, len(parts) + 1)
        ]
        found: set[str] = set()
        for pattern, codes in self.entries:
            spec = PatternSet(str(self.base), [pattern])
            if any(spec.match(entry, is_dir) for entry, is_dir in entries):
                found |= codes
        return frozenset(found)


def per_file_ignores(
    value: object, where: str, base: Path
) -> tuple[tuple[str, frozenset[str]], ...]:
    """The table's entries, checked for shape (codes are checked by ``check``)."""
    if not isinstance(value, dict):
        raise ConfigError(
            f"per-file-ignores in {where} must be a table of glob = [codes]"
        )
    entries = []
    for pattern, codes in value.items():
        if isinstance(codes, str):
            codes = [codes]
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(
                f"per-file-ignores in {where}: {pattern!r} must map to a list of codes"
            )
        entries.append((pattern, frozenset(c.strip().upper() for c in codes if c)))
    return tuple(entries)


def split(raw: str) -> frozenset[str]:
    return frozenset(c.strip().upper() for c in raw.split(",") if c.strip())


def all_codes(groups: Sequence[Iterable[str]]) -> frozenset[str]:
    return frozenset(c for group in groups for c in group)
