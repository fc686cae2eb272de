"""Batch mode: a helper module that another migrated file imports, with no
backward pass of its own, is left unchanged (AM102); its helpers are migrated
where they are called, so the batch gives what the entry point alone gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from accel_migrate.cli import main
from tests.conftest import FIXTURES

PROJECT = FIXTURES / "projects" / "cifar100" / "in"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(PROJECT, root)
    monkeypatch.chdir(tmp_path)
    return root


def test_the_helper_module_is_left_unchanged_and_says_why(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    utils = (tree / "utils.py").read_bytes()
    main(["--write", "--no-cache", "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    assert (tree / "utils.py").read_bytes() == utils
    files = {f["path"]: f for f in report["files"]}
    codes = [x["code"] for x in files["proj/utils.py"]["findings"]]
    assert codes == ["AM102"]
    assert "train.py" in files["proj/utils.py"]["findings"][0]["message"]
    assert (
        "accel.prepare_dataloader(get_test_dataloader("
        in (tree / "train.py").read_text()
    )


def test_the_batch_migrates_the_entry_point_as_it_alone_is_migrated(
    tree: Path, tmp_path: Path
) -> None:
    alone = tmp_path / "alone"
    shutil.copytree(tree, alone)
    main(["--write", "--no-cache", "-q", "proj"])
    main(["--write", "--no-cache", "-q", "alone/train.py"])
    assert (tree / "train.py").read_bytes() == (alone / "train.py").read_bytes()
    assert (tree / "utils.py").read_bytes() == (alone / "utils.py").read_bytes()


def test_a_second_run_over_the_migrated_project_changes_nothing(tree: Path) -> None:
    main(["--write", "--no-cache", "-q", "proj"])
    assert main(["--check", "--no-cache", "-q", "proj"]) == 0


def _write_batch(
    project: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    jobs: str = "1",
    skip: str | None = None,
) -> tuple[Path, dict[str, bytes], dict[str, list[str]]]:
    """Copy fixtures/projects/PROJECT/in to proj/ (``skip``: a file given a
    skip-file line), run ``--write`` over it, and return the folder, its files as
    they were before, and each file's finding codes."""
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "projects" / project / "in", root)
    monkeypatch.chdir(tmp_path)
    if skip is not None:
        path = root / skip
        path.write_text("# accel-migrate: skip-file\n" + path.read_text())
    before = {p.name: p.read_bytes() for p in root.glob("*.py")}
    main(["--write", "--no-cache", "-j", jobs, "--output-format", "json", "proj"])
    report = json.loads(capsys.readouterr().out)
    codes = {f["path"]: [x["code"] for x in f["findings"]] for f in report["files"]}
    return root, before, codes


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_importers_of_a_training_file_left_whole_are_left_whole(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    jobs: str,
) -> None:
    # engine.py trains a model it cannot prove prepared (AM004 leaves it whole);
    # train.py and finetune.py build the setup its loops run: sharding their
    # loaders alone would half-migrate it (AM103), and --write must wait for
    # engine.py's result before writing them.
    root, before, files = _write_batch(
        "engine_callers_blocked", tmp_path, monkeypatch, capsys, jobs
    )
    assert {p.name: p.read_bytes() for p in root.glob("*.py")} == before
    assert files["proj/train.py"] == ["AM103"]
    # finetune.py hands `mystery` a model that nothing there builds an
    # optimizer over: left whole by its own AM004 (no preparing it) before AM103
    assert files["proj/finetune.py"] == ["AM004"]
    assert files["proj/engine.py"] == ["AM004"]


def test_importers_of_a_training_file_the_user_skips_are_left_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same engine migrates with its callers; skip-file keeps its loops as
    # they are, so train.py must not shard the loaders they run over.
    root, before, files = _write_batch(
        "engine_callers", tmp_path, monkeypatch, capsys, skip="engine.py"
    )
    assert (root / "train.py").read_bytes() == before["train.py"]
    assert files["proj/train.py"] == ["AM103"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_training_file_an_importer_left_whole_hands_its_setup_is_left_whole(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    jobs: str,
) -> None:
    # main.py hands trainer.Trainer a model AM004 cannot wrap (left whole);
    # trainer.py migrated alone would call accel.backward on a model nobody
    # prepared. --write must wait for main.py's result before writing trainer.py.
    root, before, files = _write_batch(
        "trainer_left_whole", tmp_path, monkeypatch, capsys, jobs
    )
    assert {p.name: p.read_bytes() for p in root.glob("*.py")} == before
    assert files["proj/main.py"] == ["AM004"]
    assert files["proj/trainer.py"] == ["AM103"]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_helper_module_whose_writes_its_callers_leave_to_it_is_migrated_for_them(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    jobs: str,
) -> None:
    # ckpt.save_snapshot returns the path it saved and log.Logger keeps
    # sys.stdout and an open file: neither can move to the main process at its
    # call, so their modules place their own writes and prints (AM102)
    root, _, files = _write_batch(
        "effects_library", tmp_path, monkeypatch, capsys, jobs
    )
    expected = FIXTURES / "projects" / "effects_library" / "out"
    for name in ("ckpt.py", "log.py", "train.py"):
        assert (root / name).read_bytes() == (expected / name).read_bytes(), name
    assert "AM102" not in files["proj/ckpt.py"]
    assert set(files["proj/log.py"]) == {"AM017", "AM035"}
    assert main(["--check", "--no-cache", "-q", "proj"]) == 0


def test_importers_of_a_helper_module_the_user_skips_are_left_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # train.py keeps its save_snapshot call on every process, counting on
    # ckpt.py to write on the main process only: skipped, ckpt.py would race
    root, before, files = _write_batch(
        "effects_library", tmp_path, monkeypatch, capsys, skip="ckpt.py"
    )
    assert (root / "train.py").read_bytes() == before["train.py"]
    assert files["proj/train.py"] == ["AM103"]
    # log.py, which only train.py calls, is left whole with it
    assert (root / "log.py").read_bytes() == before["log.py"]


def test_a_helper_that_says_nothing_is_not_pointed_at_for_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """metrics.evaluate sums into an evaluator's attributes over the loader it is
    handed: nothing there is rewritten or reported, so the importer left whole
    says why instead of "see its findings" (there are none)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "metrics.py").write_text(
        "import torch\n\n\n"
        "class Evaluator:\n"
        "    def __init__(self):\n"
        "        self.total = 0.0\n\n"
        "    def update(self, pred, target):\n"
        "        self.total += (pred - target).abs().sum().item()\n\n\n"
        "@torch.no_grad()\n"
        "def evaluate(model, loader, evaluator):\n"
        "    for x, y in loader:\n"
        "        evaluator.update(model(x), y)\n"
        "    return evaluator.total\n"
    )
    (root / "main.py").write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "from metrics import Evaluator, evaluate\n\n"
        "data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))\n"
        "model = torch.nn.Linear(2, 1)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in DataLoader(data, batch_size=4):\n"
        "    opt.zero_grad()\n"
        "    torch.nn.functional.mse_loss(model(x), y).backward()\n"
        "    opt.step()\n"
        "print(evaluate(model, DataLoader(data, batch_size=4), Evaluator()))\n"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["--no-cache", "--output-format", "json", "proj"]) == 0  # a preview
    report = json.loads(capsys.readouterr().out)
    findings = {f["path"]: f["findings"] for f in report["files"]}
    assert findings["proj/metrics.py"] == []
    [kept] = findings["proj/main.py"]
    assert kept["code"] == "AM103"
    assert "came back unchanged and with no finding" in kept["message"]
    assert "see its findings" not in kept["message"]
