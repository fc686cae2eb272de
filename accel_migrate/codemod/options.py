"""What a migration is asked to do: the rules, the alias, the project's facts.

Light to import (no libcst): the command line builds options and looks results up
in its cache before it knows whether any file needs the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .project_file_facts import ProjectFacts

#: What a migrated file imports, as ``import accel_migrate.runtime as <alias>``.
RUNTIME_MODULE = "accel_migrate.runtime"
DEFAULT_ALIAS = "accel"


@dataclass(frozen=True)
class MigrateOptions:
    #: Rule codes to run (None: all); ``ignore`` removes codes from that set.
    select: frozenset[str] | None = None
    ignore: frozenset[str] = field(default_factory=frozenset)
    alias: str = DEFAULT_ALIAS
    #: Decide files that are plainly not training entry points without libcst.
    #: Off, every file takes the full libcst pass (same results, slower).
    prescreen: bool = True
    #: What the file's local imports define (``project_view``); None: read them
    #: from the file's folder (a single file), never writing them.
    project: ProjectFacts | None = None
    #: Honour ``# accel-migrate: skip`` (off only to find unused suppressions).
    honour_suppressions: bool = True

    def selected(self, code: str) -> bool:
        chosen = self.select is None or any(code.startswith(s) for s in self.select)
        return chosen and not any(code.startswith(i) for i in self.ignore)
