"""Parity on realistic legacy training scripts (``fixtures/realworld/``).

Each runnable script trains as the original (one process) and, migrated, at world
2 (DDP over gloo); world 2 must match within 1e-5 relative error per step, in the
final parameters and in the ``test `` lines. World-1 identity is the subject of
``test_parity_ddp.py``; here one script (``WORLD_1_SCRIPT``) checks it on a
realistic script. Every run gets its own empty working folder, so files one run
writes (checkpoint folders, logs) never hide a failure of the next.

The runs are independent jobs: one module-scoped fixture starts them all, a few
at a time (``PARALLEL``), before the first check, and every check reads their
results. The scripts' second runs (``SECOND_RUN``: resuming from the files the
first run wrote) run in the first run's folders, right after it.

Where the migrated script cannot match yet, the (script, check) pair is listed in
``KNOWN_GAPS`` with the reason, and the check is an ``xfail(strict=True)``: it
must fail, so fixing the tool turns it into an XPASS that asks for the entry to
be removed. Nothing is skipped silently.
"""

from __future__ import annotations

import importlib.util
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source
from tests.conftest import FIXTURES, parallel_jobs

from .harness import (
    Run,
    max_parameter_error,
    migrate_to,
    relative_errors,
    run_launched,
    run_original,
)

REALWORLD = FIXTURES / "realworld"
FP32_TOLERANCE = 1e-5

#: Scripts that are not run: why.
NOT_RUNNABLE = {
    "already_distributed": "already distributed (mp.spawn + DDP): must be left unchanged, see test_already_distributed_is_left_unchanged",
}
#: Scripts that need a package outside the dev extra.
REQUIRES = {"progress_output": "tqdm"}
#: Extra arguments for a second run in the same folders, compared like the first.
SECOND_RUN = {"checkpoints": ("--resume", "--epochs", "2")}

SCRIPTS = sorted(p for p in REALWORLD.glob("*.py") if p.stem not in NOT_RUNNABLE)

_GAN = (
    "each step draws its noise with torch.randn: at world 2 each process draws its "
    "own numbers for its half of the batch (AM020 says so), and the feature-matching "
    "loss is a statistic of the whole batch (.mean(0)), which per-process losses "
    "weighted by their share of the batch cannot rebuild; its retain_graph=True "
    "backward is reported by AM007"
)
#: (script, check) -> why the migrated script does not match the original yet.
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("gan", "losses"): _GAN,
    ("gan", "params"): _GAN,
}


#: The script whose migrated copy also runs at world 1 (must be identical).
WORLD_1_SCRIPT = "checkpoints"
#: Jobs run at once. A world-2 job is three processes, mostly waiting on each other.
PARALLEL = parallel_jobs()


def _expect(request: pytest.FixtureRequest, script: str, check: str) -> None:
    reason = KNOWN_GAPS.get((script, check))
    if reason is not None:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


@dataclass
class Outcome:
    """A run's result, or why it did not produce one (raised by the checks)."""

    run: Run | None = None
    error: str | None = None

    def get(self) -> Run:
        if self.run is None:
            raise AssertionError(self.error)
        return self.run


def _attempt(function, *args, **kwargs) -> Outcome:
    try:
        return Outcome(run=function(*args, **kwargs))
    except (AssertionError, subprocess.TimeoutExpired) as exc:
        return Outcome(error=str(exc))


@dataclass
class Runs:
    script: str
    original: Outcome = field(default_factory=Outcome)
    world2: Outcome = field(default_factory=Outcome)
    world1: Outcome | None = None
    #: The second run (SECOND_RUN), as (original, world 2).
    second: tuple[Outcome, Outcome] | None = None


def _original(script: Path, folder: Path) -> tuple[Outcome, Outcome | None]:
    folder.mkdir(parents=True, exist_ok=True)
    first = _attempt(run_original, script, folder)
    if script.stem not in SECOND_RUN or first.run is None:
        return first, None
    return first, _attempt(run_original, script, folder, *SECOND_RUN[script.stem])


def _launched(script: Path, folder: Path, nproc: int) -> tuple[Outcome, Outcome | None]:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        migrated = migrate_to(script, folder)
    except AssertionError as exc:
        return Outcome(error=f"migration: {exc}"), None
    first = _attempt(run_launched, migrated, folder, nproc)
    if script.stem not in SECOND_RUN or nproc != 2 or first.run is None:
        return first, None
    second = _attempt(run_launched, migrated, folder, nproc, *SECOND_RUN[script.stem])
    return first, second


def _runnable(script: Path) -> bool:
    module = REQUIRES.get(script.stem)
    return module is None or importlib.util.find_spec(module) is not None


@pytest.fixture(scope="module")
def all_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Runs]:
    """Every script's runs, made once for the module, several jobs at a time."""
    root = tmp_path_factory.mktemp("realworld")
    scripts = [s for s in SCRIPTS if _runnable(s)]
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        # The longest jobs (world 2) first, so that the short ones fill the gaps.
        world2 = {
            s.stem: pool.submit(_launched, s, root / s.stem / "world2", 2)
            for s in scripts
        }
        world1 = {
            s.stem: pool.submit(_launched, s, root / s.stem / "world1", 1)
            for s in scripts
            if s.stem == WORLD_1_SCRIPT
        }
        original = {
            s.stem: pool.submit(_original, s, root / s.stem / "original")
            for s in scripts
        }
        runs = {}
        for script in scripts:
            name = script.stem
            first, second = original[name].result()
            first2, second2 = world2[name].result()
            runs[name] = Runs(
                name,
                original=first,
                world2=first2,
                world1=world1[name].result()[0] if name in world1 else None,
                second=(
                    (second, second2 or Outcome(error="the first world-2 run failed"))
                    if second is not None
                    else None
                ),
            )
    return runs


def _runs(all_runs: dict[str, Runs], script: Path) -> Runs:
    if script.stem not in all_runs:
        module = REQUIRES[script.stem]
        pytest.skip(f"{script.name} imports {module}, not in the dev extra")
    return all_runs[script.stem]


@pytest.fixture(params=SCRIPTS, ids=lambda p: p.stem)
def runs(request: pytest.FixtureRequest, all_runs: dict[str, Runs]) -> Runs:
    return _runs(all_runs, request.param)


@pytest.mark.multiprocess
def test_original_runs(runs: Runs) -> None:
    assert runs.original.get().losses, "the original printed no `step N loss X` line"


@pytest.mark.multiprocess
def test_world_1_is_identical(all_runs: dict[str, Runs]) -> None:
    runs = _runs(all_runs, REALWORLD / f"{WORLD_1_SCRIPT}.py")
    assert runs.world1 is not None
    original, world1 = runs.original.get(), runs.world1.get()
    assert world1.losses == original.losses
    assert max_parameter_error(original.state, world1.state) == 0.0
    assert world1.lines("test ") == original.lines("test ")


@pytest.mark.multiprocess
def test_world_2_matches_per_step(runs: Runs, request: pytest.FixtureRequest) -> None:
    _expect(request, runs.script, "losses")
    original, world2 = runs.original.get(), runs.world2.get()
    errors = relative_errors(original.losses, world2.losses)
    worst = max(errors)
    assert (
        worst < FP32_TOLERANCE
    ), f"step {errors.index(worst)}: relative error {worst:.2e}"


@pytest.mark.multiprocess
def test_world_2_final_parameters(runs: Runs, request: pytest.FixtureRequest) -> None:
    _expect(request, runs.script, "params")
    original, world2 = runs.original.get(), runs.world2.get()
    assert original.state, "the original saved no state dict with --out"
    assert max_parameter_error(original.state, world2.state) < FP32_TOLERANCE


@pytest.mark.multiprocess
def test_world_2_evaluates_the_same(runs: Runs, request: pytest.FixtureRequest) -> None:
    _expect(request, runs.script, "eval")
    original, world2 = runs.original.get(), runs.world2.get()
    assert _eval_lines_match(original.lines("test "), world2.lines("test "))


@pytest.mark.multiprocess
@pytest.mark.parametrize("script", sorted(SECOND_RUN))
def test_world_2_second_run_matches(script: str, all_runs: dict[str, Runs]) -> None:
    """A second run in the same folders (resuming from the first run's files)."""
    runs = _runs(all_runs, REALWORLD / f"{script}.py")
    runs.original.get()
    runs.world2.get()
    assert runs.second is not None
    original, world2 = (o.get() for o in runs.second)
    errors = relative_errors(original.losses, world2.losses)
    assert max(errors) < FP32_TOLERANCE
    assert max_parameter_error(original.state, world2.state) < FP32_TOLERANCE
    assert _eval_lines_match(original.lines("test "), world2.lines("test "))


def test_already_distributed_is_left_unchanged() -> None:
    path = REALWORLD / "already_distributed.py"
    source = path.read_bytes()
    result = migrate_source(source, str(path))
    assert not result.changed
    assert result.output == source
    assert [(f.code, f.status) for f in result.findings] == [("AM100", "info")]
    assert "already distributed" in result.findings[0].message


def _eval_lines_match(before: list[str], after: list[str]) -> bool:
    """Equal, or equal but for numbers within the fp32 tolerance."""
    if len(before) != len(after):
        return False
    for b, a in zip(before, after, strict=True):
        b_words, a_words = b.split(), a.split()
        if len(b_words) != len(a_words):
            return False
        for bw, aw in zip(b_words, a_words, strict=True):
            if bw == aw:
                continue
            try:
                expected, actual = float(bw), float(aw)
            except ValueError:
                return False
            if abs(actual - expected) > FP32_TOLERANCE * max(abs(expected), 1e-12):
                return False
    return True


def test_data_outside_a_loader_is_reported() -> None:
    """batchify.py slices its data out of one tensor (``get_batch``): every process
    trains on all of it, and AM019 says so at the training loop."""
    path = REALWORLD / "batchify.py"
    result = migrate_source(path.read_bytes(), str(path))
    found = [f for f in result.findings if f.status == "needs-review"]
    assert [f.code for f in found] == ["AM019"]
    assert "not split across processes" in found[0].message
