"""``accel-migrate PATH...``: migrate files, show or write the result, report."""

from __future__ import annotations

import sys
from typing import Literal

from ..codemod import MigrateOptions, MigrationError, MigrationResult, migrate_source
from . import render
from .app import EXIT_FAILED, EXIT_OK, EXIT_WOULD_CHANGE
from .files import FileError, discover, read_source, write_atomic

Mode = Literal["preview", "write", "check"]


def run_migrate(
    paths: list[str],
    *,
    mode: Mode,
    plain_diff: bool,
    select: frozenset[str] | None,
    ignore: frozenset[str],
    color: bool | None,
    quiet: bool,
) -> int:
    options = MigrateOptions(select=select, ignore=ignore)
    if paths == ["-"]:
        return _run_stdin(options, mode, plain_diff)
    out_color = sys.stdout.isatty() if color is None else color
    err_color = sys.stderr.isatty() if color is None else color
    results: list[MigrationResult] = []
    failures: list[str] = []
    for path in discover(paths):
        try:
            result = migrate_source(read_source(path), path, options)
        except (FileError, MigrationError) as exc:
            failures.append(str(exc))
            continue
        except Exception as exc:  # a bug must not stop the batch or lose the file
            failures.append(f"{path}:1:1: internal error: {type(exc).__name__}: {exc}")
            continue
        if result.changed:
            if mode == "preview" or plain_diff:
                render.write_diff(
                    render.unified_diff(result),
                    sys.stdout,
                    out_color and not plain_diff,
                )
            if mode == "write":
                try:
                    write_atomic(
                        path,
                        (
                            result.output
                            if isinstance(result.output, bytes)
                            else result.output.encode()
                        ),
                    )
                except FileError as exc:
                    failures.append(str(exc))
                    continue
        results.append(result)
    sys.stdout.flush()
    render.write_report(
        results, failures, sys.stderr, err_color, mode=mode, quiet=quiet
    )
    if failures:
        return EXIT_FAILED
    if mode == "check" and any(r.changed for r in results):
        return EXIT_WOULD_CHANGE
    return EXIT_OK


def _run_stdin(options: MigrateOptions, mode: Mode, plain_diff: bool) -> int:
    source = sys.stdin.buffer.read()
    try:
        result = migrate_source(source, "<stdin>", options)
    except (FileError, MigrationError) as exc:
        error = str(exc)
    except Exception as exc:  # a bug must not lose the input
        error = f"<stdin>:1:1: internal error: {type(exc).__name__}: {exc}"
    else:
        error = None
    if error is not None:
        if mode != "check":
            sys.stdout.buffer.write(source)  # a filter must not swallow its input
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    if plain_diff:
        if result.changed:
            render.write_diff(render.unified_diff(result), sys.stdout, False)
    elif mode != "check":
        output = result.output
        sys.stdout.buffer.write(
            output if isinstance(output, bytes) else output.encode()
        )
    for finding in result.findings:
        print(finding.format("<stdin>"), file=sys.stderr)
    if mode == "check" and result.changed:
        return EXIT_WOULD_CHANGE
    return EXIT_OK
