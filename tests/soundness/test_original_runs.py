"""The harness runs a ``batch both`` folder's original once for its two cases
(``corpus.original_runs``); every other case runs its own. No script runs here:
``run_original`` is replaced by a recorder."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from . import corpus
from .cases import parse_case
from .corpus import Run, RunFailed, original_runs


def _folder(tmp_path: Path, directives: str) -> Path:
    project = tmp_path / "proj"
    project.mkdir()
    script = project / "main.py"
    script.write_text(f"# soundness: shape a project\n{directives}")
    return script


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, tuple[str, ...]]]:
    made: list[tuple[Path, tuple[str, ...]]] = []

    def recorded(script: Path, folder: Path, *args: str, timeout: float) -> Run:
        made.append((folder, args))
        return Run(f"step 0 loss {len(made)}\n", [float(len(made))], {})

    monkeypatch.setattr(corpus, "run_original", recorded)
    return made


def test_the_two_modes_of_a_batch_both_folder_share_one_original(
    tmp_path: Path, calls: list
) -> None:
    script = _folder(tmp_path, "# soundness: batch both\n# soundness: second-run -r\n")
    cases = parse_case("proj", script)
    assert [c.both for c in cases] == [True, True]
    root = tmp_path / "root"
    folders = [root / c.name / "original" for c in cases]
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(original_runs, cases, folders))
    # one run and one second run, in the folder of the case that asked first
    assert [args for _, args in calls] == [(), ("-r",)]
    assert got[0] == got[1]
    assert got[0][0] == calls[0][0] and got[0][0] in folders
    assert got[0][1].losses == [1.0] and got[0][2].losses == [2.0]
    # another root (another session) runs it again
    again = original_runs(cases[1], tmp_path / "other" / cases[1].name / "original")
    assert len(calls) == 4 and again[1].losses == [3.0]


def test_other_cases_run_their_own_original(tmp_path: Path, calls: list) -> None:
    for index, directives in enumerate(("", "# soundness: batch\n")):
        (tmp_path / str(index)).mkdir()
        (case,) = parse_case("proj", _folder(tmp_path / str(index), directives))
        assert not case.both
        for name in ("a", "b"):
            folder = tmp_path / "root" / name / "original"
            assert original_runs(case, folder)[0] == folder
    assert len(calls) == 4


def test_a_failed_original_fails_both_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = []

    def failing(script: Path, folder: Path, *args: str, timeout: float) -> Run:
        runs.append(folder)
        raise RunFailed("exited 1", 1, "", "Traceback")

    monkeypatch.setattr(corpus, "run_original", failing)
    cases = parse_case("proj", _folder(tmp_path, "# soundness: batch both\n"))
    for case in cases:
        with pytest.raises(RunFailed):
            original_runs(case, tmp_path / "root" / case.name / "original")
    assert len(runs) == 1
