"""The codemod: libcst rules that rewrite a training script for the runtime."""

from .engine import MigrateOptions, migrate_source
from .findings import Finding, MigrationError, MigrationResult

__all__ = [
    "Finding",
    "MigrateOptions",
    "MigrationError",
    "MigrationResult",
    "migrate_source",
]
