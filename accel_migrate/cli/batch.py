"""Migrating many files: in this process, or in worker processes (``--jobs N``).

Workers only read and migrate; they hand back plain data (a result, or a Failure)
and never write. The caller writes, one file at a time, in the order the files were
found, so an interrupt can stop the run between two atomic writes only.

A worker that dies (a crash in native code, the out-of-memory killer) breaks the
pool; the files it may have been working on are then run one at a time, each in a
fresh process, so the culprit is named and every other file is still done.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from functools import partial

from ..codemod import MigrateOptions, MigrationError, MigrationResult
from ..codemod.findings import Failure
from ..codemod.project_file_facts import ProjectFacts
from ..codemod.project_view import ProjectView
from .cache import ResultCache
from .files import FileError, read_source

Outcome = MigrationResult | Failure
Task = Callable[[str, str, MigrateOptions], Outcome]


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def migrate_file(
    path: str,
    location: str,
    options: MigrateOptions,
    cache: ResultCache | None = None,
) -> Outcome:
    """Read ``location`` and migrate it; ``path`` is how the user named it.

    Everything that can go wrong with one file comes back as a Failure. With a
    cache, the outcome for these very bytes is taken from it, or stored in it.
    """
    try:
        source = read_source(location)
    except FileError as exc:
        return Failure(path, 1, 1, exc.message)
    if cache is None:
        return _migrate(path, source, options)
    project = _project_digest(options)
    # per-file-ignores: this file's own options (its project facts are keyed apart)
    cache = cache.retarget(replace(options, project=None))
    outcome = cache.get(path, source, project)
    if outcome is None:
        outcome = _migrate(path, source, options)
        cache.put(path, source, outcome, project)
    return outcome


def _project_digest(options: MigrateOptions) -> str:
    # not `if options.project`: facts with no helpers (a file's local imports
    # and their device code) decide the output too; no facts at all hash as
    # none, so a file migrated on its own and in a batch share an entry
    project = options.project
    return "" if project is None or project == ProjectFacts() else project.digest()


#: The task the cache may answer for (a name no test or caller rebinds).
_CACHEABLE: Task = migrate_file


def migrate_source(
    source: bytes, path: str, options: MigrateOptions
) -> MigrationResult:
    """The engine's ``migrate_source``, imported at the first file that needs it: a
    run whose files all come from the cache never imports libcst or the rules."""
    from ..codemod.engine import migrate_source as engine_migrate

    return engine_migrate(source, path, options)


def _migrate(path: str, source: bytes, options: MigrateOptions) -> Outcome:
    try:
        result = migrate_source(source, path, options)
    except MigrationError as exc:
        return exc.failure()
    except RecursionError:
        return Failure(path, 1, 1, "cannot migrate: the code is nested too deeply")
    except MemoryError:
        return Failure(path, 1, 1, "cannot migrate: out of memory")
    except Exception as exc:  # a bug must not stop the batch or lose the file
        message = str(exc).splitlines()[0] if str(exc) else ""
        return Failure(path, 1, 1, f"internal error: {type(exc).__name__}: {message}")
    return result


def _light(outcome: Outcome) -> Outcome:
    """What crosses the process boundary: sources only for files that change."""
    if isinstance(outcome, MigrationResult) and not outcome.changed:
        empty = b"" if isinstance(outcome.source, bytes) else ""
        return replace(outcome, source=empty, output=empty)
    return outcome


def _work(task: Task, path: str, location: str, options: MigrateOptions) -> Outcome:
    return _light(task(path, location, options))


def _init_worker(run_pid: int) -> None:
    # Ctrl-C reaches the whole process group: the parent decides, workers go on
    # until it stops them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # The imported modules live as long as the worker: keep the collector from
    # walking them again on every full collection (the parses make many; 6% of a
    # torch-tree check).
    gc.freeze()
    threading.Thread(
        target=_exit_when_gone, args=(run_pid,), name="run-watch", daemon=True
    ).start()


def _run_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # killed but not yet reaped by its own parent: gone for our purposes
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _exit_when_gone(run_pid: int) -> None:
    """A killed run (SIGKILL, the OOM killer) must not leave workers migrating on.

    The workers' parent is the forkserver, which outlives the run while any worker
    holds its liveness pipe, so the kernel's parent-death signal cannot help here.
    """
    while _run_alive(run_pid):
        time.sleep(0.5)
    os._exit(1)


def _context() -> multiprocessing.context.BaseContext:
    """forkserver where there is one: workers start from a clean, preloaded process
    (no threads of ours, no state of the caller), and fast."""
    if (
        sys.platform != "win32"
        and "forkserver" in multiprocessing.get_all_start_methods()
    ):
        context = multiprocessing.get_context("forkserver")
        # The rule modules too: registered_rules() imports them on the first file,
        # which each worker would otherwise pay for itself.
        context.set_forkserver_preload(
            [
                "accel_migrate.cli.batch",
                "accel_migrate.codemod.engine",
                "accel_migrate.codemod.rules",
            ]
        )
        return context
    return multiprocessing.get_context("spawn")


class Batch:
    """Run ``task`` over ``paths``; ``results()`` yields them in ``paths`` order."""

    def __init__(
        self,
        paths: Sequence[str],
        options: MigrateOptions,
        *,
        jobs: int,
        task: Task = migrate_file,
        on_done: Callable[[], None] | None = None,
        cache: ResultCache | None = None,
        per_file: Sequence[MigrateOptions] | None = None,
    ) -> None:
        self.paths = list(paths)
        self.options = options
        #: Each file's options (per-file-ignores), in ``paths`` order; else ``options``.
        self._options = list(per_file) if per_file is not None else None
        self.jobs = max(1, min(jobs, len(self.paths)))
        # Only the default task reads the cache: a task of its own (a test's) runs.
        self.cache = cache if task is _CACHEABLE else None
        self.task: Task = (
            partial(_CACHEABLE, cache=self.cache) if self.cache else task  # type: ignore[call-arg]
        )
        #: Outcomes found in the cache before any worker starts (with -j).
        self._hits: dict[int, Outcome] = {}
        self._looked_up = False
        self.on_done = on_done or (lambda: None)
        self.locations = [os.path.abspath(p) for p in self.paths]
        self._pool: ProcessPoolExecutor | None = None
        self._file_options: list[MigrateOptions] | None = None

    def options_for(self, index: int) -> MigrateOptions:
        """The options of file ``index``: with the facts of its local imports, from
        one project view of the whole batch (each module parsed once)."""
        if self.options.project is not None:
            return self.options_of(index)
        if self._file_options is None:
            view = ProjectView(self.locations)
            self._file_options = [
                replace(self.options_of(i), project=view.facts_for(location))
                for i, location in enumerate(self.locations)
            ]
        return self._file_options[index]

    def options_of(self, index: int) -> MigrateOptions:
        """The options of file ``index`` with its per-file-ignores."""
        return self.options if self._options is None else self._options[index]

    @property
    def parallel(self) -> bool:
        return self.jobs > 1

    def start(self) -> None:
        """Start the workers (before any thread of the caller, such as a progress
        bar, exists)."""
        if self.parallel and self._pool is None:
            self._look_up()
            misses = len(self.paths) - len(self._hits)
            # Workers cost a process start and an import of libcst each: none for
            # a re-run over unchanged files, one for a single changed file.
            self.jobs = max(1, min(self.jobs, misses))
            if self.parallel:
                self._pool = self._new_pool(self.jobs)

    def _look_up(self) -> None:
        if self.cache is None or self._looked_up:
            return
        self._looked_up = True
        for index, path in enumerate(self.paths):
            try:
                source = read_source(self.locations[index])
            except FileError:
                continue  # the task reports it
            options = self.options_for(index)
            found = self.cache.retarget(replace(options, project=None)).get(
                path, source, _project_digest(options)
            )
            if found is not None:
                self._hits[index] = found

    def _new_pool(self, workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_context(),
            initializer=_init_worker,
            initargs=(os.getpid(),),
        )

    def results(self) -> Iterator[tuple[int, Outcome]]:
        self.start()
        if not self.parallel:
            for index, path in enumerate(self.paths):
                outcome = self._hits.pop(index, None) or self.task(
                    path, self.locations[index], self.options_for(index)
                )
                self.on_done()
                yield index, outcome
            return
        done: dict[int, Outcome] = {}
        emitted = 0
        try:
            for index, outcome in self._run_parallel():
                done[index] = outcome
                self.on_done()
                while emitted in done:
                    yield emitted, done.pop(emitted)
                    emitted += 1
        finally:
            self.stop()

    def _order(self, indices: Sequence[int]) -> list[int]:
        """Largest files first: the long ones do not end up alone at the end."""

        def size(index: int) -> int:
            try:
                return os.stat(self.locations[index]).st_size
            except OSError:
                return 0

        return sorted(indices, key=lambda i: (-size(i), i))

    def _run_parallel(self) -> Iterator[tuple[int, Outcome]]:
        yield from self._hits.items()
        remaining = self._order(
            [i for i in range(len(self.paths)) if i not in self._hits]
        )
        self._hits = {}
        while remaining:
            assert self._pool is not None
            pool = self._pool
            futures: dict[Future[Outcome], int] = {
                pool.submit(
                    _work,
                    self.task,
                    self.paths[i],
                    self.locations[i],
                    self.options_for(i),
                ): i
                for i in remaining
            }
            order = {index: n for n, index in enumerate(remaining)}
            unfinished = set(futures)
            broken: list[int] = []
            while unfinished:
                finished, unfinished = wait(unfinished, return_when=FIRST_COMPLETED)
                for future in finished:
                    try:
                        outcome = future.result()
                    except BrokenProcessPool:
                        broken.append(futures[future])
                        continue
                    yield futures[future], outcome
            if not broken:
                return
            # A worker died. Those it may have held are the first unfinished tasks
            # in the order they were handed out: run them alone, then the rest.
            pool.shutdown(wait=False, cancel_futures=True)
            broken.sort(key=order.__getitem__)
            suspects, rest = broken[: self.jobs + 1], broken[self.jobs + 1 :]
            for index in suspects:
                yield index, self._isolated(index)
            remaining = rest
            self._pool = self._new_pool(self.jobs) if rest else None

    def _isolated(self, index: int) -> Outcome:
        path = self.paths[index]
        with self._new_pool(1) as pool:
            future = pool.submit(
                _work, self.task, path, self.locations[index], self.options_for(index)
            )
            try:
                return future.result()
            except BrokenProcessPool:
                return Failure(
                    path,
                    1,
                    1,
                    "internal error: the process migrating this file died "
                    "(a crash in native code, or out of memory)",
                )

    def stop(self) -> None:
        """Stop the workers now (after an interrupt, or at the end)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=5)
        # Its manager thread sees the workers gone and closes its wake-up pipe;
        # left running, it races the interpreter's exit hook that writes to that
        # pipe ("Exception ignored ... OSError: Bad file descriptor" after an
        # interrupt, seen under load in CI).
        manager = getattr(pool, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=5)
