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

Static only: imports are read with Python's ``ast``; nothing is imported.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from ..codemod.findings import (
    SKIP_DISTRIBUTED,
    SKIP_GENERATED,
    SKIP_NOT_TRAINING,
    SKIP_SUPPRESSED,
    Failure,
    Finding,
    MigrationResult,
)
from ..codemod.options import RUNTIME_MODULE
from ..codemod.other_codes import ALREADY_DISTRIBUTED, LIBRARY_MODULE, SETUP_LEFT_WHOLE
from .files import FileError, read_source
from .project_imports import _local_imports, _names_local_module, _roots

if TYPE_CHECKING:
    from ..codemod.project_facts import ProjectFacts

Outcome = MigrationResult | Failure


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

    def training_imports(
        self, for_callers: frozenset[int] = frozenset()
    ) -> dict[int, dict[int, int]]:
        """Each file of the batch with the other files of the batch it imports
        directly that run a backward pass of their own (training files migrated
        in their own right), or helper modules migrated for their callers
        (``for_callers``), each with the line of its first import there: its result
        waits for theirs (``keep_whole_setups``)."""
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
                if ".backward(" in texts[imported] or imported in for_callers:
                    found.setdefault(entry, {}).setdefault(imported, line)
                if self.files[imported].endswith("__init__.py"):
                    # a package's `from .ppo import PPO`: importing the package
                    # (`from a2c_ppo_acktr import algo`) imports what it re-exports
                    todo += [(inner, line) for inner in direct.get(imported, {})]
        return found

    def _kept_because(
        self,
        kept: list[int],
        result: list[Outcome | None],
        for_callers: frozenset[int],
    ) -> str:
        """AM103's message for a file left whole because it imports ``kept``."""
        names = ", ".join(self.paths[t] for t in kept)
        if set(kept) <= for_callers and all(_silent(result[t]) for t in kept):
            # nothing to point at: say what may be missed there
            return (
                f"imports {names}, a helper module of this batch that this file "
                "hands its sharded loaders, which came back unchanged and with no "
                "finding: nothing in it was found to rewrite for this file's calls, "
                "yet what it computes over those loaders (a sum kept on an "
                "object's attributes, or in code the analysis does not follow) may "
                "be this process's share only; the training setup they share is "
                "migrated whole or not at all, so this file is left unchanged too; "
                f"reduce what {names} sums over the loaders with accel.reduce(...) "
                "and run the batch again"
            )
        what = (
            "a helper module of this batch migrated for this file's calls (its "
            "writes, prints and sums over the loaders it is handed), left unchanged"
            if set(kept) <= for_callers
            else "a training file of this batch left unchanged"
        )
        return (
            f"imports {names}, {what} (see its findings): the training setup they "
            "share is migrated whole or not at all, so this file is left unchanged "
            "too; resolve those findings and run the batch again"
        )

    def _root_cause(
        self,
        named: list[int],
        result: list[Outcome | None],
        blocked_by: dict[int, list[int]],
    ) -> str:
        """For a file left whole because of the files ``named``, when those are
        themselves left whole only because of others (AM103 findings pointing
        on, a chain): a sentence naming the first file down the chain left
        whole by a finding of its own, and that finding. "" when a named file
        has findings of its own (its findings are the cause)."""
        seen: set[int] = set()

        def root(index: int) -> tuple[int, Finding | None] | None:
            if index in seen:
                return None
            seen.add(index)
            outcome = result[index]
            own = [
                f
                for f in getattr(outcome, "findings", ())
                if f.status == "needs-review" and f.code != SETUP_LEFT_WHOLE.code
            ]
            if own or index not in blocked_by:
                return (index, min(own, key=lambda f: (f.line, f.column), default=None))
            for other in blocked_by[index]:
                found = root(other)
                if found is not None:
                    return found
            return None

        for index in named:
            found = root(index)
            if found is None:
                continue
            where, finding = found
            if where in named:
                return ""  # a named file says why itself
            if finding is None:
                return f" (the root cause is {self.paths[where]}, left unchanged)"
            text = finding.message
            if len(text) > _ROOT_TEXT:
                text = text[: _ROOT_TEXT - 3].rstrip() + "..."
            return (
                f" (the root cause is {self.paths[where]}:{finding.line}, "
                f"{finding.code}: {text})"
            )
        return ""

    def keep_whole_setups(
        self,
        outcomes: Sequence[Outcome | None],
        imports: dict[int, dict[int, int]],
        for_callers: frozenset[int] = frozenset(),
    ) -> list[Outcome | None]:
        """``outcomes`` with each changed file that imports a training file of the
        batch left whole (``imports``) turned into an unchanged result with one
        needs-review finding naming it (AM103): the setup the two files share is
        migrated whole or not at all. The other way round too: a training file
        whose importer is left whole (it builds the model, the loaders the file
        is handed: ``project_callers``) is left whole. Repeated until nothing
        changes, as a file left whole here may be imported by another.
        A helper module migrated for its callers (``for_callers``) is left whole
        when it is not migrated for any reason: its callers count on it."""
        result = list(outcomes)
        #: The files each file was left whole for here (for its root cause).
        blocked_by: dict[int, list[int]] = {}

        def whole(index: int) -> bool:
            if index in for_callers:
                return _not_migrated(result[index])
            return _left_whole(result[index])

        changed = True
        while changed:
            changed = False
            for entry, trainers in sorted(imports.items()):
                if _migrated(result[entry]):
                    kept = [t for t in trainers if whole(t)]
                    if kept:
                        result[entry] = _kept_whole(
                            result[entry],  # type: ignore[arg-type]
                            min(trainers[t] for t in kept),
                            self._kept_because(kept, result, for_callers)
                            + self._root_cause(kept, result, blocked_by),
                        )
                        blocked_by[entry] = kept
                        changed = True
                if not _left_whole(result[entry]):
                    continue
                for trainer in sorted(trainers):
                    if not _migrated(result[trainer]):
                        continue
                    result[trainer] = _kept_whole(
                        result[trainer],  # type: ignore[arg-type]
                        1,
                        f"is imported by {self.paths[entry]}, a training file of "
                        "this batch left unchanged (see its findings), which builds "
                        "what it hands this file (models, loaders): the training "
                        "setup they share is migrated whole or not at all, so this "
                        "file is left unchanged too; resolve those findings and run "
                        "the batch again"
                        + self._root_cause([entry], result, blocked_by),
                    )
                    blocked_by[trainer] = [entry]
                    changed = True
        return result

    def keep_orphan_libraries(
        self,
        outcomes: Sequence[Outcome | None],
        libraries: dict[int, int],
        imports: dict[int, dict[int, int]],
    ) -> list[Outcome | None]:
        """``outcomes`` with each library (``libraries``: no backward of its own)
        migrated in its own right (its loaders prepared where it builds them:
        FeatureLearningRotNet's dataloader.py, whose ``DataLoader`` class builds
        a torch DataLoader in ``get_iterator``) turned into an unchanged result
        with one needs-review finding (AM103) where its importer is no training
        entry point of its own and runs the training of a file of the batch
        that is not migrated, left whole or skipped (``imports``: main.py's
        ``getattr(alg, name)(config).solve(loader_train, loader_test)``): its
        loaders would be sharded for a training that is not migrated."""
        result = list(outcomes)
        for library, entry in sorted(libraries.items()):
            importer = result[entry]
            if not (
                _migrated(result[library])
                and isinstance(importer, MigrationResult)
                and importer.skip_reason == SKIP_NOT_TRAINING
            ):
                continue
            whole = [
                t
                for t in sorted(imports.get(entry, {}))
                if _left_whole(result[t]) or _not_migrated(result[t])
            ]
            if not whole:
                continue
            result[library] = _kept_whole(
                result[library],  # type: ignore[arg-type]
                1,
                f"is imported by {self.paths[entry]}, which is no training entry "
                f"point of its own and runs the training of {self.paths[whole[0]]}, "
                "a training file of this batch left unchanged (see its findings, or "
                "its skip reason): "
                "the loaders this file prepares would be split across processes "
                "for a training that is not migrated, so this file is left "
                "unchanged too; resolve those findings and run the batch again"
                + self._root_cause(whole[:1], result, {}),
            )
        return result

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


#: How much of a root cause's message AM103 quotes.
_ROOT_TEXT = 160


def _silent(outcome: Outcome | None) -> bool:
    """A result with nothing to say: unchanged and without a finding (not one the
    user left alone with ``# accel-migrate: skip-file``)."""
    return (
        isinstance(outcome, MigrationResult)
        and outcome.skip_reason is None
        and not outcome.findings
    )


def _migrated(outcome: Outcome | None) -> bool:
    return (
        isinstance(outcome, MigrationResult)
        and outcome.skip_reason is None
        and outcome.changed
    )


def _not_migrated(outcome: Outcome | None) -> bool:
    """A helper module that neither is migrated now nor was before."""
    if isinstance(outcome, Failure):
        return True
    if not isinstance(outcome, MigrationResult):
        return False
    if outcome.changed and outcome.skip_reason is None:
        return False
    source = outcome.source
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    return RUNTIME_MODULE not in text


def _kept_whole(outcome: MigrationResult, line: int, message: str) -> MigrationResult:
    """``outcome`` left unchanged, with one AM103 finding (its other findings
    describe the file as it would have been migrated)."""
    note = Finding(line, 1, SETUP_LEFT_WHOLE.code, "needs-review", message)
    return MigrationResult(outcome.path, outcome.source, outcome.source, (note,))


def _left_whole(outcome: Outcome | None) -> bool:
    """A training file left unchanged: for a needs-review finding, by the user's
    ``# accel-migrate: skip-file`` or as generated code, or not migrated at all
    (an error). Not one already migrated: a second run over a migrated project
    changes nothing either, and its setup is whole."""
    if isinstance(outcome, Failure):
        return True
    if not isinstance(outcome, MigrationResult):
        return False
    if outcome.skip_reason is not None:
        return outcome.skip_reason in (SKIP_SUPPRESSED, SKIP_GENERATED)
    if outcome.changed:
        return False
    source = outcome.source
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    return RUNTIME_MODULE not in text and any(
        f.status == "needs-review" for f in outcome.findings
    )


def _distributed(outcome: Outcome | None) -> bool:
    return (
        isinstance(outcome, MigrationResult) and outcome.skip_reason == SKIP_DISTRIBUTED
    )
