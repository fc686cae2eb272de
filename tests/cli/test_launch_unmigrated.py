"""``accel-migrate launch`` warns before it starts a script that never imports the
runtime (cli/unmigrated.py): read statically, never run."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.cli.unmigrated import unmigrated_warning, uses_runtime

pytest.importorskip("torch")

PLAIN = "import torch\nprint('started')\ntorch.save({}, 'ckpt.pt')\n"


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "source",
    [
        "import accel_migrate.runtime as accel\n",
        "import accel_migrate.runtime\n",
        "import torch, accel_migrate.runtime.api\n",
        "from accel_migrate import runtime\n",
        "from accel_migrate import __version__, runtime as rt\n",
        "from accel_migrate.runtime import prepare_model, backward\n",
        "from accel_migrate.runtime.api import backward\n",
        "def main():\n    import accel_migrate.runtime as accel\n",
        "try:\n    import accel_migrate.runtime as accel\nexcept ImportError:\n    accel = None\n",
        "import importlib\naccel = importlib.import_module('accel_migrate.runtime')\n",
    ],
)
def test_every_spelling_of_the_runtime_import_counts(
    tmp_path: Path, source: str
) -> None:
    assert uses_runtime(put(tmp_path / "train.py", source)) is True


@pytest.mark.parametrize(
    "source",
    [
        PLAIN,
        "import accel_migrate\n",  # the package alone is not the runtime
        "from accel_migrate import cli\n",
        "import accel_migrate_runtime\n",
        "# import accel_migrate.runtime as accel\nimport torch\n",
    ],
)
def test_a_script_without_it_is_unmigrated(tmp_path: Path, source: str) -> None:
    assert uses_runtime(put(tmp_path / "train.py", source)) is False


@pytest.mark.parametrize(
    ("script", "files"),
    [
        (
            "import trainer\ntrainer.main()\n",
            {"trainer.py": "import accel_migrate.runtime as accel\n"},
        ),
        (
            "from lib import loop\n",
            {
                "lib/__init__.py": "",
                "lib/loop.py": "from accel_migrate import runtime\n",
            },
        ),
        (
            "from lib.loop import run\n",
            {
                "lib/__init__.py": "",
                "lib/loop.py": "import utils\n",
                "utils.py": "import accel_migrate.runtime\n",
            },
        ),
    ],
    ids=["module", "package", "two-levels"],
)
def test_the_scripts_own_modules_are_followed(
    tmp_path: Path, script: str, files: dict[str, str]
) -> None:
    for name, text in files.items():
        put(tmp_path / name, text)
    assert uses_runtime(put(tmp_path / "train.py", script)) is True


def test_an_import_cycle_of_unmigrated_modules_ends(tmp_path: Path) -> None:
    put(tmp_path / "a.py", "import b\n")
    put(tmp_path / "b.py", "import a\n")
    assert uses_runtime(put(tmp_path / "train.py", "import a\n")) is False


def test_a_script_that_does_not_parse_is_not_judged(tmp_path: Path) -> None:
    assert uses_runtime(put(tmp_path / "train.py", "def broken(:\n")) is None
    assert unmigrated_warning(str(tmp_path / "train.py"), 2, "1") is None


def test_one_process_repeats_nothing_so_no_warning(tmp_path: Path) -> None:
    script = str(put(tmp_path / "train.py", PLAIN))
    assert unmigrated_warning(script, 1, "1") is None
    assert unmigrated_warning(script, 1, "2") is not None


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Stands in for torchrun's run(): records what stderr held when it started."""
    import torch.distributed
    import torch.distributed.run as torch_run

    errs: list[str] = []
    fake = types.ModuleType("torch.distributed.run")
    fake.get_args_parser = torch_run.get_args_parser  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed.run", fake)
    monkeypatch.setattr(torch.distributed, "run", fake, raising=False)
    saved = dict(os.environ)
    yield errs
    os.environ.clear()
    os.environ.update(saved)


def test_launch_warns_before_starting_an_unmigrated_script(
    tmp_path: Path, started: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    script = put(tmp_path / "train.py", PLAIN)
    sys.modules["torch.distributed.run"].run = lambda parsed: started.append(  # type: ignore[attr-defined]
        capsys.readouterr().err
    )
    assert main(["launch", "--nproc", "2", str(script)]) == 0
    assert len(started) == 1, "torchrun was started once"
    warning = started[0].splitlines()[0]
    assert warning == (
        f"warning: {script} never imports accel_migrate.runtime: it was not migrated, "
        "so each of the 2 processes runs the whole single-process script. Every line "
        "prints once per process, every process trains its own model on all the data, "
        "and every process writes the same checkpoint files. Migrate it first: "
        f"accel-migrate migrate --write {script} (with the local modules it imports: "
        f"accel-migrate migrate --write {tmp_path}); where that leaves it unchanged, "
        "its needs-review findings say why"
    )


def test_launch_of_a_migrated_script_says_nothing(
    tmp_path: Path, started: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    script = put(
        tmp_path / "train.py", "import accel_migrate.runtime as accel\n" + PLAIN
    )
    sys.modules["torch.distributed.run"].run = started.append  # type: ignore[attr-defined]
    assert main(["launch", "--nproc", "2", str(script)]) == 0
    assert len(started) == 1
    assert "warning" not in capsys.readouterr().err
