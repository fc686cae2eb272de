"""``accel-migrate migrate PATH...``: its options, checked, handed to ``run_migrate``."""

from __future__ import annotations

import sys

import click

from .exit_codes import EXIT_USAGE


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--write", is_flag=True, help="Rewrite the files in place.")
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 if any file would change."
)
@click.option(
    "--diff",
    "plain_diff",
    is_flag=True,
    help="Print a unified diff (with --check too); coloured only on a terminal "
    "or with --color always, so that `git apply` takes it piped.",
)
@click.option(
    "--output-format",
    type=click.Choice(["text", "concise", "json", "github", "sarif"]),
    default="text",
    show_default=True,
    help="How to report: for people, one line per finding, for scripts, "
    "GitHub annotations, SARIF 2.1.0.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Files migrated in parallel (default: the number of CPUs).",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Read the settings from FILE, not from the nearest pyproject.toml.",
)
@click.option(
    "--select",
    default=None,
    metavar="CODES",
    help="Comma-separated rule codes (prefixes) to run.",
)
@click.option(
    "--extend-select",
    default=None,
    metavar="CODES",
    help="Comma-separated rule codes (prefixes) to run as well as --select's.",
)
@click.option(
    "--ignore",
    default=None,
    metavar="CODES",
    help="Comma-separated rule codes (prefixes) to skip.",
)
@click.option(
    "--exclude",
    default=None,
    metavar="PATTERNS",
    help="Comma-separated gitignore-style patterns; replaces the default excludes.",
)
@click.option(
    "--extend-exclude",
    default=None,
    metavar="PATTERNS",
    help="Comma-separated gitignore-style patterns to exclude as well.",
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply the excludes to files named on the command line too (pre-commit).",
)
@click.option(
    "--respect-gitignore/--no-respect-gitignore",
    default=None,
    help="Skip what .gitignore files ignore (default: yes).",
)
@click.option(
    "--alias",
    default=None,
    metavar="NAME",
    help="Name of the runtime import (import accel_migrate.runtime as NAME).",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default=None,
    help="Colour diffs and reports: always, never, or auto (on a terminal, "
    "unless NO_COLOR is set; the default).",
)
@click.option("--no-color", is_flag=True, help="The same as --color never.")
@click.option(
    "--exit-zero",
    is_flag=True,
    help="Exit 0 even when --check finds files that would change "
    "(files that fail still exit 123).",
)
@click.option(
    "--stdin-filename",
    default=None,
    metavar="PATH",
    help="The name of the file read from stdin: for messages, per-file-ignores "
    "and finding the configuration.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Neither read nor write the results cache (~/.cache/accel-migrate).",
)
@click.option("-q", "--quiet", is_flag=True, help="Only errors and the summary line.")
def migrate(
    paths: tuple[str, ...],
    write: bool,
    check: bool,
    plain_diff: bool,
    output_format: str,
    jobs: int | None,
    config: str | None,
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    exclude: str | None,
    extend_exclude: str | None,
    force_exclude: bool,
    respect_gitignore: bool | None,
    alias: str | None,
    color: str | None,
    no_color: bool,
    exit_zero: bool,
    stdin_filename: str | None,
    no_cache: bool,
    quiet: bool,
) -> int:
    """Migrate PATH... (files or folders; '-' for stdin)."""
    from .migrate_command import run_migrate

    if write and check:
        raise click.UsageError("--write and --check exclude each other")
    if no_color and color not in (None, "never"):
        raise click.UsageError(f"--no-color and --color {color} exclude each other")
    if "-" in paths and len(paths) > 1:
        raise click.UsageError("'-' (stdin) cannot be combined with other paths")
    if "-" in paths and output_format not in ("text", "concise"):
        raise click.UsageError(
            "'-' (stdin) works with --output-format text or concise only"
        )
    if stdin_filename is not None and paths != ("-",):
        raise click.UsageError("--stdin-filename goes with '-' (stdin) only")
    if paths != ("-",):
        problem = _command_like(paths[0])
        if problem is not None:
            print(f"error: {problem}", file=sys.stderr)
            return EXIT_USAGE
    return run_migrate(
        list(paths),
        mode="write" if write else "check" if check else "preview",
        plain_diff=plain_diff,
        output_format=output_format,
        jobs=jobs,
        config=config,
        select=_codes(select) if select is not None else None,
        extend_select=_codes(extend_select) if extend_select is not None else None,
        ignore=_codes(ignore) if ignore is not None else None,
        exclude=_patterns(exclude) if exclude is not None else None,
        extend_exclude=(
            _patterns(extend_exclude) if extend_exclude is not None else None
        ),
        force_exclude=force_exclude,
        respect_gitignore=respect_gitignore,
        alias=alias,
        color=_color("never" if no_color else color),
        quiet=quiet,
        cache=not no_cache,
        exit_zero=exit_zero,
        stdin_filename=stdin_filename,
    )


def _color(when: str | None) -> bool | None:
    """True/False when asked for; None: decide per stream (a terminal, no NO_COLOR)."""
    import os

    if when == "always":
        return True
    if when == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    return None


def _command_like(first: str) -> str | None:
    """A first argument that is no file and a bare word, like a command
    (``accel-migrate rule AM001``, ``accel-migrate envv``), is a usage error (as
    black makes a missing path), not a file that failed."""
    import os
    from difflib import get_close_matches

    from .group import cli

    if os.path.exists(first) or "/" in first or os.sep in first or "." in first:
        return None
    commands = sorted(cli.commands)
    near = get_close_matches(first.lower(), commands, n=1, cutoff=0.6)
    hint = f" (did you mean `accel-migrate {near[0]}`?)" if near else ""
    return f"no such command or file: {first!r}{hint}; commands: {', '.join(commands)}"


def _codes(raw: str) -> frozenset[str]:
    return frozenset(c.strip().upper() for c in raw.split(",") if c.strip())


def _patterns(raw: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in raw.split(",") if p.strip())
