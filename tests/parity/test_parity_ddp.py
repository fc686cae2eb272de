"""Parity, Fabric-style: each runnable fixture trains as the original on one process
and migrated at world 1 and world 2 (DDP over gloo), on the same seeds.

World 1 must print identical losses and end with identical parameters; world 2
must agree within 1e-5 relative error at every step and in the final parameters.
World 1 runs for ``WORLD_1`` only: one script per runtime path that world 1 still
goes through (the precision plugin, checkpoints through the strategy, the
synchronised BatchNorm, a token-mean reduction, the DataParallel unwrap); the
other scripts' world-1 runs repeated those paths at the cost of a launch each.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, parallel_jobs

from .harness import (
    Run,
    max_parameter_error,
    migrate_to,
    relative_errors,
    run_launched,
    run_original,
)

pytestmark = pytest.mark.multiprocess

SCRIPTS = sorted((FIXTURES / "parity").glob("*.py"))
WORLD_1 = ("amp_loop", "batchnorm_cnn", "data_parallel_resume", "token_mean")
FP32_TOLERANCE = 1e-5


Runs = tuple[Run, Run | None, Run]


def _runs(script: Path, workdir: Path, pool: ThreadPoolExecutor) -> Future[Runs]:
    """The original and the migrated script at world 1 and 2, as one job: the
    launches start together and the pool keeps the cores busy across scripts."""
    migrated = migrate_to(script, workdir)
    world2 = pool.submit(run_launched, migrated, workdir, 2)
    world1 = (
        pool.submit(run_launched, migrated, workdir, 1)
        if script.stem in WORLD_1
        else None
    )
    original = pool.submit(run_original, script, workdir)
    done: Future[Runs] = Future()
    jobs = [j for j in (original, world1, world2) if j is not None]

    def finish(_: Future) -> None:
        if all(f.done() for f in jobs) and not done.done():
            try:
                done.set_result(
                    (
                        original.result(),
                        None if world1 is None else world1.result(),
                        world2.result(),
                    )
                )
            except BaseException as exc:  # the case's own tests raise it
                done.set_exception(exc)

    for job in jobs:
        job.add_done_callback(finish)
    return done


@pytest.fixture(scope="module")
def all_runs(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> dict[str, Future[Runs]]:
    """Every selected script's runs, started once for the module, a few jobs at
    a time (``parallel_jobs``); each test waits for its own script's."""
    names = _selected(request.session)
    pool = ThreadPoolExecutor(max_workers=parallel_jobs())
    request.addfinalizer(pool.shutdown)
    assert set(WORLD_1) <= {s.stem for s in SCRIPTS}
    return {
        s.stem: _runs(s, tmp_path_factory.mktemp(s.stem), pool)
        for s in SCRIPTS
        if s.stem in names
    }


def _selected(session: pytest.Session) -> set[str]:
    """The scripts whose tests were selected (``-k``); all when none was."""
    chosen = {
        item.callspec.params["script"].stem
        for item in session.items
        if isinstance(item, pytest.Function)
        and item.module is not None
        and item.module.__name__ == __name__
        and hasattr(item, "callspec")
        and isinstance(item.callspec.params.get("script"), Path)
    }
    return chosen or {s.stem for s in SCRIPTS}


@pytest.fixture(params=SCRIPTS, ids=lambda p: p.stem)
def script(request: pytest.FixtureRequest) -> Path:
    return request.param


@pytest.fixture
def runs(script: Path, all_runs: dict[str, Future[Runs]]) -> Runs:
    return all_runs[script.stem].result()


@pytest.mark.parametrize(
    "script", [s for s in SCRIPTS if s.stem in WORLD_1], ids=lambda p: p.stem
)
def test_world_1_is_identical(runs) -> None:
    original, world1, _ = runs
    assert world1 is not None
    assert world1.losses == original.losses
    assert max_parameter_error(original.state, world1.state) == 0.0


def test_world_2_matches_per_step(runs) -> None:
    original, _, world2 = runs
    errors = relative_errors(original.losses, world2.losses)
    worst = max(errors)
    assert (
        worst < FP32_TOLERANCE
    ), f"step {errors.index(worst)}: relative error {worst:.2e}"


def test_world_2_final_parameters(runs) -> None:
    original, _, world2 = runs
    assert max_parameter_error(original.state, world2.state) < FP32_TOLERANCE


def test_world_2_prints_once_and_evaluates_the_same(runs) -> None:
    original, _, world2 = runs
    assert len(world2.losses) == len(
        original.losses
    ), "every step printed once, by the main process"
    assert world2.lines("test ") == original.lines("test ") or _close_eval(
        original, world2
    )


def _close_eval(original, world2) -> bool:
    """Evaluation lines equal up to the last printed digit of the loss."""
    before, after = original.lines("test "), world2.lines("test ")
    if len(before) != len(after):
        return False
    for b, a in zip(before, after, strict=True):
        b_words, a_words = b.split(), a.split()
        if [w for i, w in enumerate(b_words) if i != 2] != [
            w for i, w in enumerate(a_words) if i != 2
        ]:
            return False
        if abs(float(b_words[2]) - float(a_words[2])) > FP32_TOLERANCE * abs(
            float(b_words[2])
        ):
            return False
    return True
