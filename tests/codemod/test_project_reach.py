"""The minGPT layout migrated one script at a time: a package at the project root
(``mingpt/``, installed with ``pip install -e .``) and scripts in
``projects/<name>/`` (issue 12).

- local imports are found from the script's folder up to the project root
  (``project_view.roots_of``), read and never written;
- a script with no loop of its own that trains through a library class
  (``Trainer(config, model, dataset).run()``, chargpt) gets AM004's blocking
  finding, not "not a training entry point";
- a loss the model's ``forward`` computes in another file (``logits, loss =
  model(x, y)``) keeps its reduction: a mean over the targets that are not
  ``ignore_index`` is weighted by their count, or is needs-review.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project, roots_of
from tests.conftest import FIXTURES

MINGPT = FIXTURES / "projects" / "mingpt" / "in"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "minGPT"
    shutil.copytree(MINGPT, root)  # with its setup.py: the project root
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file()
    }


def _lines(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [f"{f.line}: {f.code} [{f.status}] {f.message}" for f in result.findings]


# -- 1. the project root -------------------------------------------------------------


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.py", "setup.cfg", ".git"])
def test_roots_run_up_to_the_nearest_project_marker(
    tmp_path: Path, marker: str
) -> None:
    script = tmp_path / "repo" / "projects" / "adder" / "adder.py"
    script.parent.mkdir(parents=True)
    script.write_text("import torch\n")
    # no marker anywhere: the script's own folder only, as before
    assert roots_of(str(script)) == (str(script.parent),)
    (tmp_path / "repo" / marker).write_text("")  # a worktree's .git is a file
    assert roots_of(str(script)) == (
        str(script.parent),
        str(script.parent.parent),
        str(tmp_path / "repo"),
    )


def test_the_home_folder_is_never_a_project_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a dotfiles repository in ~ must not make every script under it one project
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".git").mkdir()
    (tmp_path / "utils.py").write_text("def get_loader():\n    return None\n")
    script = tmp_path / "experiments" / "mnist" / "train.py"
    script.parent.mkdir(parents=True)
    script.write_text("import torch\nimport utils\n")
    assert roots_of(str(script)) == (str(script.parent),)
    assert not read_project(str(script))


def test_an_installed_package_has_no_project_above_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    module = tmp_path / "venv" / "lib" / "site-packages" / "pkg" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("import torch\n")
    assert str(tmp_path) not in roots_of(str(module))


def test_the_runtime_package_is_never_a_local_module(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    runtime = tmp_path / "accel_migrate" / "runtime"
    runtime.mkdir(parents=True)
    (tmp_path / "accel_migrate" / "__init__.py").write_text("")
    (runtime / "__init__.py").write_text("def backward(loss):\n    print(loss)\n")
    script = tmp_path / "examples" / "train.py"
    script.parent.mkdir()
    script.write_text("import accel_migrate.runtime as accel\naccel.backward(1)\n")
    assert not read_project(str(script))


def test_adder_alone_finds_mingpt_at_the_root_and_is_left_whole(tree: Path) -> None:
    """Before: mingpt was not found from projects/adder_trainer/, the trainer fact
    was never learnt and the script was half-migrated (its eval loader sharded,
    its prints and save moved) while mingpt/trainer.py trained unmigrated."""
    before = _snapshot(tree)
    script = tree / "projects" / "adder_trainer" / "adder.py"
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    assert result.output == script.read_bytes()
    am004 = [f for f in result.findings if f.code == "AM004"]
    assert len(am004) == 1 and am004[0].status == "needs-review"
    # the fact names the file it came from, relative to the project root
    assert "`Trainer` in mingpt/trainer.py" in am004[0].message
    assert "backward (line 70)" in am004[0].message
    assert _snapshot(tree) == before  # read, never written


def test_without_a_marker_the_root_is_not_guessed(tree: Path) -> None:
    (tree / "setup.py").unlink()
    script = tree / "projects" / "adder_trainer" / "adder.py"
    assert not read_project(str(script))


# -- 2. a script that trains through a library class ---------------------------------


@pytest.mark.parametrize("prescreen", [True, False])
def test_chargpt_alone_is_blocked_not_skipped(tree: Path, prescreen: bool) -> None:
    """Before: "not a training entry point", with no finding, while every process
    of a launch trained a full copy in mingpt/trainer.py."""
    script = tree / "projects" / "chargpt" / "chargpt.py"
    result = migrate_source(
        script.read_bytes(), str(script), MigrateOptions(prescreen=prescreen)
    )
    assert result.skip_reason is None
    assert not result.changed
    codes = {(f.code, f.status) for f in result.findings}
    assert ("AM004", "needs-review") in codes
    [am004] = [f for f in result.findings if f.code == "AM004"]
    assert am004.line == 40
    assert "`Trainer` in mingpt/trainer.py" in am004.message


def test_chargpt_in_a_batch_prepares_the_model_it_hands_the_trainer(
    tree: Path,
) -> None:
    """In a batch with mingpt/trainer.py (migrated too: it learns from its
    callers that ``model`` is handed in built there), chargpt prepares the
    model it builds, once; before, it was blocked as with one file argument."""
    files = sorted(str(p) for p in tree.rglob("*.py"))
    view = ProjectView(files)
    script = str(tree / "projects" / "chargpt" / "chargpt.py")
    result = migrate_source(
        Path(script).read_bytes(),
        script,
        MigrateOptions(project=view.facts_for(script)),
    )
    assert result.changed
    output = result.output.decode()  # type: ignore[union-attr]
    assert output.count("accel.prepare_model(") == 1
    assert "model = accel.prepare_model(GPT(model_config))" in output
    trainer = str(tree / "mingpt" / "trainer.py")
    library = migrate_source(
        Path(trainer).read_bytes(),
        trainer,
        MigrateOptions(project=view.facts_for(trainer)),
    )
    text = library.output.decode()  # type: ignore[union-attr]
    assert "prepare_model" not in text
    assert "accel.prepare_optimizer(model.configure_optimizers(config))" in text
    assert "accel.backward(self.loss, count=(y != -1).sum())" in text


def test_importing_a_trainer_without_handing_it_a_model_is_not_training(
    tree: Path,
) -> None:
    script = tree / "projects" / "chargpt" / "show.py"
    script.write_text(
        "import torch\n\nfrom mingpt.trainer import Trainer\n\n"
        "print(Trainer.get_default_config(), torch.__version__)\n"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert result.skip_reason == "not a training entry point"
    assert not result.findings


# -- 3. a loss computed in another file's forward ------------------------------------

LOOP = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from mingpt.model import GPT

config = GPT.get_default_config()
config.vocab_size, config.block_size = 10, 8
model = GPT(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randint(0, 10, (32, 9))
loader = DataLoader(TensorDataset(data[:, :-1], data[:, 1:]), batch_size=8)
for x, y in loader:
    {step}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
"""


def _migrate_loop(tree: Path, step: str, name: str = "train.py"):  # type: ignore[no-untyped-def]
    script = tree / "projects" / "adder" / name
    script.write_text(LOOP.replace("{step}", step))
    # as a batch of the whole tree: the old code found mingpt this way too
    view = ProjectView(sorted(str(p) for p in tree.rglob("*.py")))
    options = MigrateOptions(project=view.facts_for(str(script)))
    return migrate_source(script.read_bytes(), str(script), options)


@pytest.mark.parametrize(
    "step", ["logits, loss = model(x, y)", "logits, loss = model(x, targets=y)"]
)
def test_a_token_mean_of_another_files_forward_is_weighted_by_its_count(
    tree: Path, step: str
) -> None:
    """Before: ``accel.backward(loss)``, [fixed]: weighted as a mean over samples
    while each process's count of targets that are not -1 can differ."""
    result = _migrate_loop(tree, step)
    text = result.output.decode()  # type: ignore[union-attr]
    assert "accel.backward(loss, count=(y != -1).sum())" in text
    [am007] = [f for f in result.findings if f.code == "AM007"]
    assert am007.status == "fixed"
    assert "`GPT.forward` in mingpt/model.py" in am007.message


def test_targets_changed_before_the_backward_is_needs_review(tree: Path) -> None:
    result = _migrate_loop(tree, "logits, loss = model(x, y)\n    y = y.flip(0)")
    [am007] = [f for f in result.findings if f.code == "AM007"]
    assert am007.status == "needs-review"
    assert "count=" not in result.output.decode()  # type: ignore[union-attr]
    assert "`y` is assigned in between" in am007.message


def test_a_forward_that_shifts_its_targets_is_needs_review(tree: Path) -> None:
    model = tree / "mingpt" / "model.py"
    model.write_text(
        model.read_text().replace(
            "targets.view(-1), ignore_index=-1",
            "targets[:, 1:].reshape(-1), ignore_index=-1",
        )
    )
    result = _migrate_loop(tree, "logits, loss = model(x, y)")
    [am007] = [f for f in result.findings if f.code == "AM007"]
    assert am007.status == "needs-review"
    assert "count=" not in result.output.decode()  # type: ignore[union-attr]
    assert (
        "the targets that are not `ignore_index` (-1) of `F.cross_entropy`, "
        "computed inside `GPT.forward` in mingpt/model.py" in am007.message
    )


def test_a_plain_mean_of_another_files_forward_stays_a_sample_mean(
    tree: Path,
) -> None:
    model = tree / "mingpt" / "model.py"
    model.write_text(model.read_text().replace(", ignore_index=-1", ""))
    result = _migrate_loop(tree, "logits, loss = model(x, y)")
    [am007] = [f for f in result.findings if f.code == "AM007"]
    assert am007.status == "fixed"
    assert "accel.backward(loss)\n" in result.output.decode()  # type: ignore[union-attr]


def test_a_loss_unpacked_from_two_model_calls_is_needs_review(tree: Path) -> None:
    result = _migrate_loop(
        tree,
        "logits, loss = model(x, y)\n"
        "    if loss.item() > 9:\n"
        "        logits, loss = model(x.flip(0), y.flip(0))",
    )
    [am007] = [f for f in result.findings if f.code == "AM007"]
    assert am007.status == "needs-review"
    assert "`loss` is unpacked from 2 model calls" in am007.message
    assert "count=" not in result.output.decode()  # type: ignore[union-attr]
