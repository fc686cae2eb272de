"""The files of one batch are one project: what an already-distributed entry point
imports stays as it is.

A library module (``train.py`` of a Hogwild ``main.py``, the ``engine.py`` of a DDP
launcher) may look like a single-GPU training script on its own: it has the loop,
the loader, the optimizer. Rewritten, it would call the runtime inside a program that
already runs its own processes and process group. So the local imports of each
already-distributed file are followed (transitively, to the files of this batch
only), and any of them that would be rewritten or reported is left unchanged
instead, with one finding naming the file that imports it.

Files are written as they are migrated; only those that a file which may be
distributed imports (``suspects``, found before the batch starts) wait for the end.

Static only: imports are read with Python's ``ast``; nothing is imported. Which results
share a training setup with a file left unchanged (AM103) is ``whole_setups.py``.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..codemod.findings import SKIP_DISTRIBUTED, Finding, MigrationResult
from ..codemod.options import RUNTIME_MODULE
from ..codemod.other_codes import ALREADY_DISTRIBUTED, LIBRARY_MODULE
from ..codemod.project_libraries import handed_loaders
from .files import FileError, read_source
from .project_imports import _local_imports, _names_local_module, _roots
from .whole_setups import (
    Outcome,
    keep_orphan_libraries,
    keep_unfed_libraries,
    keep_whole_setups,
)

if TYPE_CHECKING:
    from ..codemod.project_file_facts import ProjectFacts


class Project:
    """The batch's files, and which of them an already-distributed file imports."""

    def __init__(self, paths: Sequence[str], locations: Sequence[str]) -> None:
        self.paths = list(paths)
        self.files = [os.path.realpath(loc) for loc in locations]
        self.index = {real: i for i, real in enumerate(self.files)}
        folders = [os.path.dirname(real) for real in self.index]
        self.base = os.path.commonpath(folders) if len(folders) > 1 else ""
        #: Each file's imports, read once per run.
        self._imports: dict[str, tuple[tuple[int, tuple[str, ...], int], ...]] = {}
        #: Each file's text, read once per run (None: unreadable).
        self._texts: dict[int, str | None] = {}

    def _text(self, index: int) -> str | None:
        if index not in self._texts:
            try:
                raw = read_source(self.files[index])
                self._texts[index] = raw.decode("utf-8", errors="replace")
            except FileError:
                self._texts[index] = None
        return self._texts[index]

    def imported_by(self, entries: Iterable[int]) -> dict[int, int]:
        """The batch's files that the files ``entries`` import, directly or through
        another of them, each with the first entry that reaches it. One walk for
        all entries (a file is visited once, under the first entry's roots)."""
        reached: dict[str, int] = {}
        if not self.base:
            return {}
        queue: deque[tuple[str, int, list[str]]] = deque()
        for entry in entries:
            start = self.files[entry]
            if start not in reached:
                reached[start] = entry
                roots = _roots(os.path.dirname(start), self.base)
                queue.append((start, entry, roots))
        starts = set(reached)
        while queue:
            current, entry, roots = queue.popleft()
            for found, _ in _local_imports(current, roots, self.index, self._imports):
                if found not in reached:
                    reached[found] = entry
                    queue.append((found, entry, roots))
        return {
            self.index[real]: entry
            for real, entry in reached.items()
            if real not in starts
        }

    def suspects(self) -> set[int]:
        """Files whose result must wait for the whole batch: those imported by a
        file that may be distributed (a word of the screen in its text). Cheap:
        substring tests, and ``ast`` for the imports of those files only."""
        if not self.base:
            return set()
        from ..codemod.screen import may_be_distributed  # libcst: only when asked

        candidates = []
        for entry in range(len(self.files)):
            text = self._text(entry)
            if text is not None and may_be_distributed(text):
                candidates.append(entry)
        return set(self.imported_by(candidates))

    def _batch_imports(self) -> Iterator[tuple[int, int, str, int]]:
        """(importer, imported file, its text, the import's line) for each import
        of a file of the batch by another, with the imported file readable. Imports are parsed
        only for files whose text names a module of the batch."""
        if not self.base:
            return
        stems = {
            os.path.basename(
                os.path.dirname(f) if f.endswith("__init__.py") else f
            ).removesuffix(".py")
            for f in self.files
        }
        texts = [self._text(i) for i in range(len(self.files))]
        for entry, real in enumerate(self.files):
            text = texts[entry]
            if text is None or not _names_local_module(text, stems):
                continue
            roots = _roots(os.path.dirname(real), self.base)
            for target, line in _local_imports(real, roots, self.index, self._imports):
                imported = self.index[target]
                own = texts[imported]
                if imported != entry and own is not None:
                    yield entry, imported, own, line

    def libraries(self) -> dict[int, int]:
        """Files of the batch that another file of the batch imports and that run
        no backward pass of their own, each with its first importer: their
        helpers are migrated where the importer calls them (AM102)."""
        found: dict[int, int] = {}
        for entry, library, own, _ in self._batch_imports():
            if ".backward(" not in own:
                found.setdefault(library, entry)
        return found

    def keep_libraries(
        self,
        outcomes: Sequence[Outcome | None],
        libraries: dict[int, int],
        for_callers: frozenset[int] = frozenset(),
    ) -> list[Outcome | None]:
        """``outcomes`` with each changed library (``libraries``) whose importer
        the rules ran on (a training file, migrated now or already) turned into
        an unchanged result: its needs-review findings and one info finding
        naming the importer. (A second run over a migrated project keeps it so.)
        A library migrated for its callers (``for_callers``:
        ``ProjectFacts.library_for``) keeps its migration."""
        result = list(outcomes)
        for library, entry in sorted(libraries.items()):
            if library in for_callers:
                continue
            outcome, importer = result[library], result[entry]
            if not (
                isinstance(outcome, MigrationResult)
                and outcome.skip_reason is None
                and outcome.changed
                and isinstance(importer, MigrationResult)
                and importer.skip_reason is None
            ):
                continue
            review = tuple(f for f in outcome.findings if f.status == "needs-review")
            # an importer left whole (a blocked setup) migrates no helper either;
            # one migrated before (a second run) still does
            source = importer.source
            migrated = importer.changed or (
                RUNTIME_MODULE
                in (
                    source.decode("utf-8", "replace")
                    if isinstance(source, bytes)
                    else source
                )
            )
            why = (
                "which migrates its helpers where it calls them"
                if migrated
                else "which is left unchanged (see its findings)"
            )
            note = Finding(
                1,
                1,
                LIBRARY_MODULE.code,
                "info",
                f"imported by {self.paths[entry]}, {why}; left unchanged",
            )
            result[library] = MigrationResult(
                outcome.path, outcome.source, outcome.source, (note, *review)
            )
        return result

    def migrated_libraries(
        self,
        libraries: dict[int, int],
        facts: Callable[[int], ProjectFacts | None],
    ) -> frozenset[int]:
        """The ``libraries`` (AM102) that the project view migrates for their
        callers (``ProjectFacts.library_for``), by each file's facts."""
        return frozenset(
            i
            for i in libraries
            if (found := facts(i)) is not None and found.library_for
        )

    def loader_libraries(
        self,
        migrated: frozenset[int],
        facts: Callable[[int], ProjectFacts | None],
    ) -> frozenset[int]:
        """Of the libraries ``migrated`` for their callers, those the callers hand
        a loader (``handed_loaders``), not migrated for their writes alone."""
        return frozenset(
            i
            for i in migrated
            if (found := facts(i)) is not None and handed_loaders(found.callers)
        )

    def training_imports(
        self, for_callers: frozenset[int] = frozenset()
    ) -> dict[int, dict[int, int]]:
        """Each file of the batch with the other files of the batch it imports
        that run a backward pass of their own (training files migrated in their
        own right), or helper modules migrated for their callers
        (``for_callers``), each with the line of its first import there: its result
        waits for theirs (``keep_whole_setups``). Imported directly, or through
        a package's ``__init__.py`` or a module that trains nothing itself (a
        registry of trainers importing them)."""
        direct: dict[int, dict[int, int]] = {}
        texts: dict[int, str] = {}
        for entry, imported, own, line in self._batch_imports():
            direct.setdefault(entry, {}).setdefault(imported, line)
            texts[imported] = own
        found: dict[int, dict[int, int]] = {}
        for entry, imports in direct.items():
            todo, seen = list(imports.items()), {entry}
            while todo:
                imported, line = todo.pop(0)
                if imported in seen:
                    continue
                seen.add(imported)
                trains = ".backward(" in texts[imported] or imported in for_callers
                if trains:
                    found.setdefault(entry, {}).setdefault(imported, line)
                if self.files[imported].endswith("__init__.py") or not trains:
                    # a package's `from .ppo import PPO`: importing the package
                    # (`from a2c_ppo_acktr import algo`) imports what it re-exports;
                    # a helper module that trains nothing hands on what it imports
                    # (CenterNet's main.py picks its Trainer from
                    # trains/train_factory.py, which imports trains/ctdet.py, whose
                    # CtdetTrainer is trains/base_trainer.py's BaseTrainer)
                    todo += [(inner, line) for inner in direct.get(imported, {})]
        return found

    def keep_whole_setups(
        self,
        outcomes: Sequence[Outcome | None],
        imports: dict[int, dict[int, int]],
        for_callers: frozenset[int] = frozenset(),
        handed_loaders: frozenset[int] | None = None,
    ) -> list[Outcome | None]:
        """``outcomes`` with the files that share a training setup with a file left
        unchanged left unchanged too (AM103: ``whole_setups.keep_whole_setups``)."""
        return keep_whole_setups(
            self.paths, outcomes, imports, for_callers, handed_loaders
        )

    def keep_orphan_libraries(
        self,
        outcomes: Sequence[Outcome | None],
        libraries: dict[int, int],
        imports: dict[int, dict[int, int]],
    ) -> list[Outcome | None]:
        """``outcomes`` with each library whose loaders would be prepared for a
        training that is not migrated left unchanged (AM103:
        ``whole_setups.keep_orphan_libraries``)."""
        return keep_orphan_libraries(self.paths, outcomes, libraries, imports)

    def keep_unfed_libraries(
        self,
        outcomes: Sequence[Outcome | None],
        libraries: dict[int, int],
        for_callers: frozenset[int] = frozenset(),
    ) -> list[Outcome | None]:
        """``outcomes`` with each library migrated in its own right that no
        migrated file of the batch imports left unchanged (AM103:
        ``whole_setups.keep_unfed_libraries``)."""
        importers: dict[int, set[int]] = {}
        for entry, imported, _, _ in self._batch_imports():
            importers.setdefault(imported, set()).add(entry)
        return keep_unfed_libraries(
            self.paths, outcomes, libraries, importers, for_callers
        )

    def keep_distributed_imports(
        self, outcomes: Sequence[Outcome | None]
    ) -> list[Outcome | None]:
        """``outcomes`` (by file), with the local modules that an already-distributed
        file imports turned into unchanged, skipped results."""
        result = list(outcomes)
        entries = [i for i, outcome in enumerate(outcomes) if _distributed(outcome)]
        if not entries:
            return result
        for library, entry in sorted(self.imported_by(entries).items()):
            outcome = result[library]
            if (
                isinstance(outcome, MigrationResult)
                and outcome.skip_reason is None
                and (outcome.changed or outcome.findings)
            ):
                result[library] = MigrationResult(
                    outcome.path,
                    outcome.source,
                    outcome.source,
                    (
                        Finding(
                            1,
                            1,
                            ALREADY_DISTRIBUTED.code,
                            "info",
                            f"imported by {self.paths[entry]}, which is already "
                            "distributed; left unchanged",
                        ),
                    ),
                    skip_reason=SKIP_DISTRIBUTED,
                )
        return result


def _distributed(outcome: Outcome | None) -> bool:
    return (
        isinstance(outcome, MigrationResult) and outcome.skip_reason == SKIP_DISTRIBUTED
    )
