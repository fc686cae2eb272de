"""The minGPT layout migrated one script at a time: a package at the project root
(``mingpt/``, installed with ``pip install -e .``) and scripts in
``projects/<name>/`` (issue 12).

- local imports are found from the script's folder up to the project root
  (``project_view.roots_of``), read and never written;
- a script with no loop of its own that trains through a library class
  (``Trainer(config, model, dataset).run()``, chargpt) gets AM004's blocking
  finding, not "not a training entry point";
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


def test_chargpt_in_a_batch_is_blocked(tree: Path) -> None:
    files = sorted(str(p) for p in tree.rglob("*.py"))
    view = ProjectView(files)
    script = str(tree / "projects" / "chargpt" / "chargpt.py")
    result = migrate_source(
        Path(script).read_bytes(),
        script,
        MigrateOptions(project=view.facts_for(script)),
    )
    assert [f.code for f in result.findings if f.status == "needs-review"][:1] == [
        "AM004"
    ]


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
