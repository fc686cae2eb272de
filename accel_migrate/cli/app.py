"""The command line. Thin: ``main(argv)`` runs the command group (``group``: its
commands parse their options and call the codemod or the launcher) and turns
click's errors into exit codes.

Nothing heavy is imported at module level, so ``accel-migrate --help`` stays fast:
libcst, rich and torch load inside the commands that need them.
"""

from __future__ import annotations

import sys

import click

from .exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE
from .group import cli

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "EXIT_WOULD_CHANGE", "cli", "main"]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv``; return the exit code instead of exiting."""
    try:
        result = cli.main(args=argv, prog_name="accel-migrate", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        exc.show(file=sys.stderr)
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show(file=sys.stderr)
        return exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    if isinstance(result, int):
        return result
    return EXIT_OK
