"""World-2 parity of projects whose Trainer class lives in another file, migrated
as one batch (``fixtures/projects/mingpt``: ``mingpt/trainer.py``'s ``Trainer``
handed a GPT built in ``projects/adder_trainer/adder.py``, whose step callback
prints ``trainer.loss`` and an eval over a sharded loader;
``fixtures/projects/trainer_class``: a ddp-tutorial-style ``Trainer`` in
``trainer.py`` driven by ``main.py``; ``fixtures/projects/trainer_builds_optimizer``:
a fit/evaluate ``Trainer`` handed ``Regressor()`` inline, building its own
loaders and optimizer).

Each project is migrated with ``migrate_tree`` (the batch's decisions, as
``accel-migrate ROOT`` makes them), and the original (one process) and the
migrated tree (``accel-migrate launch --nproc 2``, DDP over gloo) print the same
train losses and eval numbers to 1e-5 (dropout is 0 in the minGPT config).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.codemod.test_golden_projects import migrate_tree
from tests.conftest import FIXTURES

from .harness import _run

pytestmark = pytest.mark.multiprocess

TOLERANCE = 1e-5
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def _trees(case: str, tmp_path: Path) -> tuple[Path, Path]:
    original = tmp_path / "original"
    shutil.copytree(FIXTURES / "projects" / case / "in", original)
    migrated = tmp_path / "migrated"
    shutil.copytree(original, migrated)
    results = migrate_tree(original)
    assert any(r.changed for r in results.values())
    for rel, result in results.items():
        output = result.output
        (migrated / rel).write_bytes(
            output if isinstance(output, bytes) else output.encode()
        )
    return original, migrated


def _lines(stdout: str, prefixes: tuple[str, ...]) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(prefixes)]


def _assert_same(expected: list[str], actual: list[str]) -> None:
    assert expected, "the original printed nothing to compare"
    assert len(expected) == len(actual), (expected, actual)
    for want, got in zip(expected, actual, strict=True):
        assert _NUMBER.sub("#", want) == _NUMBER.sub("#", got), (want, got)
        for a, b in zip(_NUMBER.findall(want), _NUMBER.findall(got), strict=True):
            x, y = float(a), float(b)
            assert abs(x - y) <= TOLERANCE * max(abs(x), 1.0), (want, got)


def _both(
    tree: tuple[Path, Path],
    script: str,
    args: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[str, str]:
    original, migrated = tree
    runs = []
    for root, launch in (
        (original, ()),
        (migrated, ("-m", "accel_migrate", "launch", "--nproc", "2")),
    ):
        # the project's packages (`mingpt`) import from its root, as after
        # `pip install -e .`; the runtime from this checkout
        path = os.pathsep.join(
            [str(root), os.getcwd(), os.environ.get("PYTHONPATH", "")]
        )
        monkeypatch.setenv("PYTHONPATH", path)
        runs.append(_run([sys.executable, *launch, script, *args], root))
    return runs[0], runs[1]


def test_mingpt_adder_through_its_trainer_matches_at_world_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _trees("mingpt", tmp_path)
    first, second = _both(
        tree, "projects/adder_trainer/adder.py", ("--steps", "12"), monkeypatch
    )
    prefixes = ("step ", "eval ")
    _assert_same(_lines(first, prefixes), _lines(second, prefixes))
    assert len(_lines(first, ("eval ",))) == 2  # two evals in 12 steps


def test_trainer_class_in_another_file_matches_at_world_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _trees("trainer_class", tmp_path)
    first, second = _both(
        tree, "main.py", ("--epochs", "2", "--out", "snap.pt"), monkeypatch
    )
    prefixes = ("epoch ", "val accuracy ")
    _assert_same(_lines(first, prefixes), _lines(second, prefixes))


def test_trainer_that_builds_its_loaders_and_optimizer_matches_at_world_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = _trees("trainer_builds_optimizer", tmp_path)
    first, second = _both(tree, "main.py", ("--epochs", "2"), monkeypatch)
    prefixes = ("epoch ", "eval mse ")
    _assert_same(_lines(first, prefixes), _lines(second, prefixes))
