"""The codemod: libcst rules that rewrite a training script for the runtime.

``migrate_source`` (the engine, libcst and every rule) is imported when first
used: a command-line run whose files all come from the cache never imports it.
"""

from typing import TYPE_CHECKING, Any

from .findings import Finding, MigrationError, MigrationResult
from .options import MigrateOptions

if TYPE_CHECKING:
    from .engine import migrate_source

__all__ = [
    "Finding",
    "MigrateOptions",
    "MigrationError",
    "MigrationResult",
    "migrate_source",
]


def __getattr__(name: str) -> Any:
    if name == "migrate_source":
        from .engine import migrate_source

        return migrate_source
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
