"""A training setup is migrated whole or not at all, across the files of a batch
(AM103): the results of files that share one setup with a file left unchanged.

A file that imports a training file of the batch left unchanged (for a
needs-review finding, the user's ``# accel-migrate: skip-file``, an error) is left
unchanged too, and so is a training file whose importer, which builds what it is
handed, is left unchanged; a loader module migrated for a training that is not
migrated is left unchanged as well, and so is one that no migrated file of the
batch imports, directly or through others, while a training file that does is
left unchanged. Each gets one needs-review finding naming the
file it follows and, down a chain of such files, the root cause.

Works on the results of the batch only (``cli/project.py`` finds the imports).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..codemod.findings import (
    SKIP_GENERATED,
    SKIP_NOT_TRAINING,
    SKIP_SUPPRESSED,
    Failure,
    Finding,
    MigrationResult,
)
from ..codemod.options import RUNTIME_MODULE
from ..codemod.other_codes import SETUP_LEFT_WHOLE

Outcome = MigrationResult | Failure


def _kept_because(
    paths: Sequence[str],
    kept: list[int],
    result: list[Outcome | None],
    for_callers: frozenset[int],
) -> str:
    """AM103's message for a file left whole because it imports ``kept``."""
    names = ", ".join(paths[t] for t in kept)
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
    paths: Sequence[str],
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
            return f" (the root cause is {paths[where]}, left unchanged)"
        text = finding.message
        if len(text) > _ROOT_TEXT:
            text = text[: _ROOT_TEXT - 3].rstrip() + "..."
        return (
            f" (the root cause is {paths[where]}:{finding.line}, "
            f"{finding.code}: {text})"
        )
    return ""


def keep_whole_setups(
    paths: Sequence[str],
    outcomes: Sequence[Outcome | None],
    imports: dict[int, dict[int, int]],
    for_callers: frozenset[int] = frozenset(),
    handed_loaders: frozenset[int] | None = None,
) -> list[Outcome | None]:
    """``outcomes`` with each changed file that imports a training file of the
    batch left whole (``imports``) turned into an unchanged result with one
    needs-review finding naming it (AM103): the setup the two files share is
    migrated whole or not at all. The other way round too: a training file
    whose importer is left whole (it builds the model, the loaders the file
    is handed: ``project_callers``) is left whole. Repeated until nothing
    changes, as a file left whole here may be imported by another.
    A helper module migrated for its callers (``for_callers``) is left whole
    when it is not migrated for any reason: its callers count on it; but not
    one migrated for its writes and prints alone (none of ``handed_loaders``:
    no caller hands it a loader) that comes back unchanged with no finding
    (the DPO repository's utils.py, whose ``get_local_run_dir`` makes a folder
    with ``exist_ok=True``): nothing in it needed changing, and it sums over
    no loader of theirs. ``handed_loaders`` None: every one counts as handed
    loaders."""
    result = list(outcomes)
    #: The files each file was left whole for here (for its root cause).
    blocked_by: dict[int, list[int]] = {}

    def whole(index: int) -> bool:
        if index in for_callers:
            if (
                handed_loaders is not None
                and index not in handed_loaders
                and _silent(result[index])
            ):
                return False  # its writes needed no change
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
                        _kept_because(paths, kept, result, for_callers)
                        + _root_cause(paths, kept, result, blocked_by),
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
                    f"is imported by {paths[entry]}, a training file of "
                    "this batch left unchanged (see its findings), which builds "
                    "what it hands this file (models, loaders): the training "
                    "setup they share is migrated whole or not at all, so this "
                    "file is left unchanged too; resolve those findings and run "
                    "the batch again" + _root_cause(paths, [entry], result, blocked_by),
                )
                blocked_by[trainer] = [entry]
                changed = True
    return result


def keep_orphan_libraries(
    paths: Sequence[str],
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
            f"is imported by {paths[entry]}, which is no training entry "
            f"point of its own and runs the training of {paths[whole[0]]}, "
            "a training file of this batch left unchanged (see its findings, or "
            "its skip reason): "
            "the loaders this file prepares would be split across processes "
            "for a training that is not migrated, so this file is left "
            "unchanged too; resolve those findings and run the batch again"
            + _root_cause(paths, whole[:1], result, {}),
        )
    return result


def keep_unfed_libraries(
    paths: Sequence[str],
    outcomes: Sequence[Outcome | None],
    libraries: dict[int, int],
    importers: dict[int, set[int]],
    for_callers: frozenset[int] = frozenset(),
) -> list[Outcome | None]:
    """``outcomes`` with each library (``libraries``: no backward of its own)
    migrated in its own right (its loaders prepared where it builds them, not
    one migrated for its callers: ``for_callers``) turned into an unchanged
    result with one needs-review finding (AM103) where no file of the batch
    that imports it, directly or through others (``importers``: each file's
    direct importers), is migrated, now or before, and one of them is a
    training file left whole (ADDA's datasets/mnist.py, whose ``get_mnist``
    builds the loader that utils.py's ``get_data_loader`` hands main.py, whose
    training in core/adapt.py is left whole): its loaders would be split
    across processes for a training that each process runs whole on its
    share. Other libraries migrated in their own right that import it do not
    count as migrated importers (datasets/usps.py reusing mnist.py's helper)."""
    result = list(outcomes)
    own = {
        library
        for library in libraries
        if library not in for_callers and _migrated(result[library])
    }
    for library in sorted(own):
        seen: set[int] = set()
        todo = sorted(importers.get(library, ()))
        while todo:
            current = todo.pop(0)
            if current in seen or current == library:
                continue
            seen.add(current)
            todo += sorted(importers.get(current, ()))
        if not seen or any(t not in own and not _not_migrated(result[t]) for t in seen):
            continue
        whole = [
            t
            for t in sorted(seen)
            if t not in own
            and _left_whole(result[t])
            and not isinstance(result[t], Failure)
        ]
        if not whole:
            continue
        result[library] = _kept_whole(
            result[library],  # type: ignore[arg-type]
            1,
            f"is imported, directly or through other files, only by files of "
            f"this batch that are not migrated, among them {paths[whole[0]]}, "
            "a training file left unchanged (see its findings): the loaders "
            "this file prepares would be split across processes for a "
            "training that each process runs whole on its share, so this "
            "file is left unchanged too; resolve those findings and run the "
            "batch again" + _root_cause(paths, whole[:1], result, {}),
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
