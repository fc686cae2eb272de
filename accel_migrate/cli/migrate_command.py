"""``accel-migrate PATH...``: find the files, migrate them (in parallel), show or
write the result, report.

Writes happen here, in this process, one file at a time and in the order the files
were found; each is atomic. An interrupt (SIGINT, SIGTERM) stops the run between
two writes: every file is either as it was or fully migrated.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Literal

from ..codemod import MigrateOptions, MigrationError, MigrationResult, python_ast
from ..codemod.findings import Failure
from . import render
from .app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE
from .batch import Batch, default_jobs, migrate_source
from .cache import ResultCache
from .codes import PerFileIgnores, known_codes
from .config import ConfigError, Settings, load_settings
from .files import FileError, discover, write_atomic
from .project import Outcome, Project
from .report_formats import Report, display_path, to_github, to_json, to_sarif

Mode = Literal["preview", "write", "check"]

EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class Terminated(BaseException):
    """SIGTERM, turned into an exception so that ``finally`` blocks run."""


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_migrate(
    paths: list[str],
    *,
    mode: Mode,
    plain_diff: bool,
    output_format: str = "text",
    jobs: int | None = None,
    config: str | None = None,
    select: frozenset[str] | None = None,
    ignore: frozenset[str] | None = None,
    extend_select: frozenset[str] | None = None,
    exclude: tuple[str, ...] | None = None,
    extend_exclude: tuple[str, ...] | None = None,
    force_exclude: bool = False,
    respect_gitignore: bool | None = None,
    alias: str | None = None,
    color: bool | None = None,
    quiet: bool = False,
    cache: bool = True,
    exit_zero: bool = False,
    stdin_filename: str | None = None,
) -> int:
    stdin = paths == ["-"]
    try:
        settings = load_settings(
            # The configuration of a file read from stdin is that of its name.
            [stdin_filename] if stdin and stdin_filename else paths,
            config=config,
            select=select,
            ignore=ignore,
            extend_select=extend_select,
            exclude=exclude,
            extend_exclude=extend_exclude,
            respect_gitignore=respect_gitignore,
            alias=alias,
            known_codes=known_codes,
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    options = MigrateOptions(
        select=settings.selected, ignore=settings.ignore, alias=settings.alias
    )
    per_file = PerFileIgnores(settings.base, settings.per_file_ignores)
    if stdin:
        name = stdin_filename or "<stdin>"
        if stdin_filename:
            options = _for_file(options, per_file, stdin_filename)
        code = _run_stdin(
            options,
            mode,
            plain_diff,
            name=name,
            quiet=quiet,
            concise=output_format == "concise",
        )
        return EXIT_OK if exit_zero and code == EXIT_WOULD_CHANGE else code
    with _sigterm_raises():
        try:
            return _run_files(
                paths,
                settings,
                options,
                mode=mode,
                plain_diff=plain_diff,
                output_format=output_format,
                jobs=jobs or default_jobs(),
                force_exclude=force_exclude,
                color=color,
                quiet=quiet,
                cache=ResultCache.for_options(options) if cache else None,
                per_file=per_file,
                exit_zero=exit_zero,
            )
        except KeyboardInterrupt:
            code = EXIT_INTERRUPTED
        except Terminated:
            code = EXIT_TERMINATED
    print(
        "error: interrupted; every file is either unchanged or fully migrated",
        file=sys.stderr,
    )
    return code


def _run_files(
    paths: list[str],
    settings: Settings,
    options: MigrateOptions,
    *,
    mode: Mode,
    plain_diff: bool,
    output_format: str,
    jobs: int,
    force_exclude: bool,
    color: bool | None,
    quiet: bool,
    cache: ResultCache | None = None,
    per_file: PerFileIgnores | None = None,
    exit_zero: bool = False,
) -> int:
    text = output_format in ("text", "concise")
    out_color = sys.stdout.isatty() if color is None else color
    err_color = sys.stderr.isatty() if color is None else color
    # Diffs go to stdout in the text format (always in preview mode, with --diff
    # otherwise); the other formats carry them only when --diff asks for them.
    show_diff = plain_diff or (text and mode == "preview")
    print_diff = show_diff and output_format in ("text", "concise", "github")
    files = list(discover(paths, settings, force_exclude=force_exclude))
    report = Report(mode=mode)
    batch = Batch(
        files,
        options,
        jobs=jobs,
        cache=cache,
        per_file=(
            [_for_file(options, per_file, f) for f in files]
            if per_file is not None and per_file.entries
            else None
        ),
    )
    bar_wanted = (
        not quiet and len(files) > 1 and sys.stdout.isatty() and sys.stderr.isatty()
    )
    batch.start()  # worker processes exist before the progress bar's thread
    # What an already-distributed file imports is left alone (cli/project.py): the
    # files it may import wait for the whole batch; every other file is written as
    # it comes.
    project = Project(files, batch.locations)
    # Writing, a file waits only if a file that may be distributed imports it (a
    # cheap pass before the batch); otherwise nothing is written, and every file
    # that would change or be reported waits (the pass runs only on those, after).
    # A helper module that another migrated file imports is migrated at the call
    # sites (AM102): it waits for its importer's result.
    # A file that imports a training file of the batch waits for it: left whole,
    # that file leaves the importer whole too (AM103), and the other way round:
    # the training file waits for its importers (they build what it is handed).
    libraries = project.libraries()
    # of them, those migrated for their callers (their writes, their sums)
    migrated = project.migrated_libraries(
        libraries, lambda i: batch.options_for(i).project
    )
    trainers = project.training_imports(migrated)
    imported = {t for found in trainers.values() for t in found}
    held = (
        (project.suspects() | set(libraries) | set(trainers) | imported)
        if mode == "write"
        else set()
    )
    wait_all = mode != "write"
    outcomes: list[Outcome | None] = [None] * len(files)

    def emit(index: int, outcome: Outcome) -> None:
        if isinstance(outcome, MigrationResult) and outcome.changed:
            if show_diff:
                diff = render.unified_diff(outcome)
                if print_diff:
                    render.write_diff(diff, sys.stdout, out_color)
                else:
                    report.diffs[index] = diff
            if mode == "write":
                outcome = _write(outcome)  # type: ignore[assignment]
        outcomes[index] = outcome

    with render.ProgressBar(len(files), enabled=bar_wanted) as bar:
        batch.on_done = bar.advance
        try:
            for index, outcome in batch.results():
                if index in held or (wait_all and _protectable(outcome)):
                    held.add(index)
                    outcomes[index] = outcome
                else:
                    emit(index, outcome)
        finally:
            batch.stop()
    if held:
        kept = project.keep_unfed_libraries(
            project.keep_orphan_libraries(
                project.keep_whole_setups(
                    project.keep_libraries(
                        project.keep_distributed_imports(outcomes), libraries, migrated
                    ),
                    trainers,
                    migrated,
                    project.loader_libraries(
                        migrated, lambda i: batch.options_for(i).project
                    ),
                ),
                libraries,
                trainers,
            ),
            libraries,
            migrated,
        )
        for index in sorted(held):
            emit(index, kept[index])  # type: ignore[arg-type]
    report.outcomes.extend(o for o in outcomes if o is not None)
    sys.stdout.flush()
    report.exit_code = _exit_code(report, mode)
    if exit_zero and report.exit_code == EXIT_WOULD_CHANGE:
        report.exit_code = EXIT_OK
    if output_format == "json":
        sys.stdout.write(to_json(report))
    elif output_format == "sarif":
        sys.stdout.write(to_sarif(report))
    elif output_format == "github":
        sys.stdout.write(to_github(report))
        print(render.summary(report.outcomes, mode), file=sys.stderr)
    elif output_format == "concise":
        render.write_concise(
            report.outcomes, sys.stderr, err_color, mode=mode, quiet=quiet
        )
    else:
        render.write_report(
            report.outcomes, sys.stderr, err_color, mode=mode, quiet=quiet
        )
    return report.exit_code


def _for_file(
    options: MigrateOptions, per_file: PerFileIgnores, path: str
) -> MigrateOptions:
    """``options`` with the per-file-ignores that match ``path``."""
    codes = per_file.codes_for(path)
    if not codes:
        return options
    return replace(options, ignore=options.ignore | codes)


def _protectable(outcome: Outcome) -> bool:
    return (
        isinstance(outcome, MigrationResult)
        and outcome.skip_reason is None
        and (outcome.changed or bool(outcome.findings))
    )


def _write(result: MigrationResult) -> MigrationResult | Failure:
    """Write ``result`` in place: only output that parses, only over the bytes
    that were read."""
    source, output = _as_bytes(result.source), _as_bytes(result.output)
    try:
        python_ast.parse(output)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return Failure(
            result.path,
            getattr(exc, "lineno", None) or 1,
            1,
            "internal error: the migrated code does not parse; file left unchanged",
        )
    try:
        write_atomic(result.path, output, expected=source)
    except FileError as exc:
        return Failure(result.path, 1, 1, exc.message)
    return result


def _as_bytes(data: str | bytes) -> bytes:
    return data if isinstance(data, bytes) else data.encode()


def _exit_code(report: Report, mode: Mode) -> int:
    if report.failures:
        return EXIT_FAILED
    if mode == "check" and any(r.changed for r in report.results):
        return EXIT_WOULD_CHANGE
    return EXIT_OK


def _run_stdin(
    options: MigrateOptions,
    mode: Mode,
    plain_diff: bool,
    *,
    name: str = "<stdin>",
    quiet: bool = False,
    concise: bool = False,
) -> int:
    """Read stdin, write the migrated code (or the diff) to stdout; findings go to
    stderr as ``NAME:line:col: ...`` lines (none with ``-q``)."""
    source = sys.stdin.buffer.read()
    shown = display_path(name)
    try:
        result = migrate_source(source, name, options)
    except (FileError, MigrationError) as exc:
        error = (
            f"{shown}:{exc.line}:{exc.column}: {exc.message}"
            if isinstance(exc, MigrationError)
            else str(exc)
        )
    except RecursionError:
        error = f"{shown}:1:1: cannot migrate: the code is nested too deeply"
    except Exception as exc:  # a bug must not lose the input
        error = f"{shown}:1:1: internal error: {type(exc).__name__}: {exc}"
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
    if not quiet:
        for finding in result.findings:
            if concise:
                print(render.concise_line(shown, finding), file=sys.stderr)
            else:
                print(finding.format(shown), file=sys.stderr)
    if mode == "check" and result.changed:
        return EXIT_WOULD_CHANGE
    return EXIT_OK
