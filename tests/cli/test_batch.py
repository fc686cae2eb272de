"""Batch conversion: walking folders (.gitignore, excludes, @generated, links),
``--jobs``, the summary tables and the progress bar, configuration."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.cli.app import EXIT_FAILED, EXIT_OK, EXIT_USAGE, EXIT_WOULD_CHANGE
from accel_migrate.cli.batch import Batch, migrate_file
from accel_migrate.cli.config import (
    BATCH_MODES,
    PRECISIONS,
    STRATEGIES,
    Settings,
    load_settings,
)
from accel_migrate.cli.files import discover
from accel_migrate.codemod import MigrateOptions
from accel_migrate.codemod.findings import Failure, MigrationResult

from .test_cli import TRAIN, put, run

NEEDS_REVIEW = TRAIN.replace(
    'model = torch.nn.Linear(2, 2).to("cuda")\n',
    'model = torch.nn.Linear(2, 2).to("cuda")\ndevice = torch.device("mps")\n',
)


pytestmark = pytest.mark.in_tmp(clear=("ACCEL_MIGRATE_",))


def found(*paths: str, **kwargs) -> list[str]:
    return list(discover(list(paths), **kwargs))


# --- .gitignore ----------------------------------------------------------------------


def make_repo() -> None:
    Path(".git").mkdir()
    put(".gitignore", "# generated\n/build_out/\n*_old.py\nlogs/\n!keep_old.py\n")
    for name in (
        "src/train.py",
        "src/train_old.py",
        "src/keep_old.py",
        "build_out/x.py",
        "src/build_out/y.py",  # "/build_out/" is anchored to the root
        "src/logs/z.py",
        "src/nested/a.py",
        "src/nested/b.py",
        "src/nested/deeper/c.py",
    ):
        put(name, "x = 1\n")
    put("src/nested/.gitignore", "b.py\ndeeper/\n")


def test_gitignore_files_are_respected_from_the_repository_root() -> None:
    make_repo()
    assert found(".") == [
        "./src/build_out/y.py",
        "./src/keep_old.py",
        "./src/nested/a.py",
        "./src/train.py",
    ]
    # walking a subfolder still reads the root's .gitignore
    assert found("src/nested") == ["src/nested/a.py"]
    # --no-respect-gitignore
    everything = found(".", settings=Settings(respect_gitignore=False))
    assert "./src/train_old.py" in everything and len(everything) == 9


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_gitignore_matching_agrees_with_git(tmp_path: Path) -> None:
    make_repo()
    subprocess.run(["git", "init", "-q", "."], check=True, capture_output=True)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "--", "*.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(p.removeprefix("./") for p in found(".")) == sorted(listed)


def test_a_file_named_directly_is_taken_even_when_ignored_unless_force_exclude() -> (
    None
):
    make_repo()
    assert found("src/train_old.py") == ["src/train_old.py"]
    assert found("src/train_old.py", force_exclude=True) == []
    assert found("build_out/x.py", force_exclude=True) == []
    assert found("src/train.py", force_exclude=True) == ["src/train.py"]


# --- exclude / extend-exclude and the configuration -----------------------------------


def test_exclude_patterns_from_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("pkg/a.py", "pkg/legacy/b.py", "pkg/c_pb2.py", "pkg/build/d.py"):
        put(name)
    code, out, _ = run(capsys, "--check", "--extend-exclude", "legacy/,*_pb2.py", "pkg")
    assert code == EXIT_WOULD_CHANGE
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == []  # --check prints no diff
    code, out, _ = run(capsys, "--diff", "--extend-exclude", "legacy/,*_pb2.py", "pkg")
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == ["pkg/a.py"]
    # --exclude replaces the defaults: build/ is walked again
    code, out, _ = run(capsys, "--diff", "--exclude", "legacy/", "pkg")
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == [
        "pkg/a.py",
        "pkg/build/d.py",
        "pkg/c_pb2.py",
    ]


PYPROJECT = """\
[project]
name = "legacy"

[tool.accel-migrate]
extend-exclude = ["vendored/"]
ignore = ["AM008"]
alias = "dist_rt"
strategy = "ddp"
precision = "bf16"
"""


def test_pyproject_settings_are_found_upward_and_flags_override_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("pyproject.toml", PYPROJECT)
    put("code/train.py")
    put("code/vendored/train.py")
    os.chdir("code")
    code, out, _ = run(capsys, "--diff", ".")
    assert code == EXIT_OK
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == ["train.py"]
    assert "import accel_migrate.runtime as dist_rt" in out
    assert "dist_rt.backward(loss)" in out
    assert "dist_rt.print" not in out  # AM008 ignored
    # the command line wins
    code, out, _ = run(capsys, "--diff", "--ignore", "", "--alias", "rt", ".")
    assert "rt.print" in out and "import accel_migrate.runtime as rt" in out


def test_config_file_named_with_config(capsys: pytest.CaptureFixture[str]) -> None:
    put("pyproject.toml", PYPROJECT)
    put("other.toml", '[tool.accel-migrate]\nalias = "other"\n')
    put("plain.toml", 'select = ["AM007"]\n')
    put("train.py")
    code, out, _ = run(capsys, "--diff", "--config", "other.toml", "train.py")
    assert "import accel_migrate.runtime as other" in out
    code, out, _ = run(capsys, "--diff", "--config", "plain.toml", "train.py")
    assert "accel.backward(loss)" in out and "prepare_model" not in out
    code, _, err = run(capsys, "--config", "missing.toml", "train.py")
    assert code == EXIT_USAGE and "missing.toml: no such file" in err


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('strategy = "tpu"', "strategy='tpu'"),
        ('precision = "fp8"', "precision='fp8'"),
        ('alias = "not a name"', "is not a Python name"),
        ("exclude = 3", "must be a list of strings"),
        ('selct = ["AM001"]', "unknown key"),
        ('select = ["AM00-1"]', "is not a rule code"),
        ("timeout = -1", "must be positive"),
    ],
)
def test_bad_settings_are_usage_errors(
    table: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    put("pyproject.toml", f"[tool.accel-migrate]\n{table}\n")
    put("train.py")
    code, out, err = run(capsys, "--check", "train.py")
    assert code == EXIT_USAGE
    assert message in err and "pyproject.toml" in err
    assert out == ""


def test_not_toml_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    put("pyproject.toml", "[tool.accel-migrate\n")
    put("train.py")
    code, _, err = run(capsys, "--check", "train.py")
    assert code == EXIT_USAGE and "not valid TOML" in err


def test_the_choices_are_the_runtimes() -> None:
    from accel_migrate.runtime import config

    assert (STRATEGIES, PRECISIONS, BATCH_MODES) == (
        config.STRATEGIES,
        config.PRECISIONS,
        config.BATCH_MODES,
    )


def test_settings_without_a_pyproject_are_the_defaults() -> None:
    put("train.py")
    settings = load_settings(["train.py"])
    assert settings.source is None and settings.alias == "accel"
    assert settings.select is None and settings.respect_gitignore


# --- @generated, links --------------------------------------------------------------


def test_generated_files_are_skipped_and_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("pkg/train.py")
    put("pkg/train_gen.py", "# @generated by a tool\n" + TRAIN)
    code, _out, err = run(capsys, "--check", "pkg")
    assert code == EXIT_WOULD_CHANGE
    assert "1 file would be migrated, 1 skipped (generated)." in err


def test_links_are_not_followed_out_of_the_tree_or_into_loops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put("outside/secret.py")
    put("tree/train.py")
    os.symlink("../outside/secret.py", "tree/link_out.py")  # out of the tree
    os.symlink("train.py", "tree/link_in.py")  # the same file again
    os.symlink("..", "tree/parent")  # a folder loop
    os.symlink("../outside", "tree/outside_dir")  # a folder out of the tree
    assert found("tree") == ["tree/train.py"]
    code, out, _err = run(capsys, "--diff", "tree")
    assert code == EXIT_OK
    assert re.findall(r"^--- a/(\S+)$", out, re.M) == ["tree/train.py"]


# --- --jobs: parallel, same results in the same order ---------------------------------


def _tree() -> None:
    for n in range(12):
        put(f"pkg/m{n:02d}/train.py", TRAIN if n % 3 else NEEDS_REVIEW)
        put(f"pkg/m{n:02d}/util.py", "def f(x):\n    return x + 1\n")
    put("pkg/m05/broken.py", "import torch\nx = (1,\n")


def test_jobs_give_the_same_output_in_the_same_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _tree()
    one = run(capsys, "--jobs", "1", "pkg")
    two = run(capsys, "--jobs", "3", "pkg")
    assert one == two
    code, out, err = one
    assert code == EXIT_FAILED
    shown = re.findall(r"^--- a/(\S+)$", out, re.M)
    assert shown == sorted(shown) and len(shown) == 12
    assert "error: pkg/m05/broken.py:2:" in err


def test_jobs_write_every_file(capsys: pytest.CaptureFixture[str]) -> None:
    _tree()
    code, _, _err = run(capsys, "--write", "--jobs", "2", "pkg")
    assert code == EXIT_FAILED
    migrated = [p for p in Path("pkg").rglob("train.py") if b"accel." in p.read_bytes()]
    assert len(migrated) == 12
    assert sorted(p.name for p in Path(".").rglob("*.tmp")) == []


def test_jobs_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    put("train.py")
    code, _, _err = run(capsys, "--jobs", "0", "train.py")
    assert code == EXIT_USAGE


def crash_on_boom(path: str, location: str, options: MigrateOptions):
    """A task whose process dies on one file, as a crash in native code would."""
    if path.endswith("boom.py"):
        os._exit(70)
    return migrate_file(path, location, options)


def test_a_worker_that_dies_fails_its_file_only() -> None:
    names = [f"pkg/t{n}.py" for n in range(6)]
    for name in names:
        put(name)
    put("pkg/boom.py")
    paths = sorted([*names, "pkg/boom.py"])
    batch = Batch(paths, MigrateOptions(), jobs=2, task=crash_on_boom)
    outcomes = list(batch.results())
    assert [i for i, _ in outcomes] == list(range(len(paths)))
    by_path = {paths[i]: o for i, o in outcomes}
    failure = by_path["pkg/boom.py"]
    assert isinstance(failure, Failure)
    assert "died" in failure.message
    for name in names:
        result = by_path[name]
        assert isinstance(result, MigrationResult) and result.changed


# --- the summary ---------------------------------------------------------------------


def test_summary_tables_of_a_batch(capsys: pytest.CaptureFixture[str]) -> None:
    put("pkg/a_train.py")
    put("pkg/b_review.py", NEEDS_REVIEW)
    put("pkg/c_util.py", "x = 1\n")
    put("pkg/d_ddp.py", "import torch.distributed as dist\ndist.init_process_group()\n")
    put("pkg/e_skip.py", "# accel-migrate: skip-file\n" + TRAIN)
    put(
        "pkg/f_line.py",
        TRAIN.replace(
            "    loss.backward()\n", "    loss.backward()  # accel-migrate: skip\n"
        ),
    )
    put("pkg/g_bad.py", "print 'hello'\n")
    put("pkg/h_done.py")
    assert main(["--write", "-q", "pkg/h_done.py"]) == EXIT_OK
    capsys.readouterr()
    code, _out, err = run(capsys, "--check", "pkg")
    assert code == EXIT_FAILED
    summary = err[err.index("summary") :]
    rows = dict(
        (m.group(1).strip(), int(m.group(2)))
        for m in re.finditer(r"│\s*([a-z ]+?)\s*│\s*(\d+)\s*│", summary)
    )
    assert rows == {
        "scanned": 8,
        "would be migrated": 3,
        "unchanged": 1,
        "skipped": 3,
        "not a training entry point": 1,
        "already distributed": 1,
        "suppressed": 1,
        "generated": 0,
        "failed": 1,
        "statements suppressed": 1,
    }
    assert re.search(
        r"rewrites per rule.*AM007\s+│\s*tensor-backward\s+│\s+2", err, re.S
    )
    assert re.search(r"needs review.*pkg/b_review\.py:4\s+│\s*AM001", err, re.S)
    assert err.rstrip().splitlines()[-1] == (
        "3 files would be migrated, 1 unchanged, 1 skipped (already distributed), "
        "1 skipped (not a training entry point), 1 skipped (suppressed), "
        "1 statement suppressed, 1 finding needs review, 1 failed."
    )


def test_quiet_and_single_files_have_no_summary_tables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    put("pkg/a.py")
    put("pkg/b.py")
    _, _, err = run(capsys, "--check", "-q", "pkg")
    assert "summary" not in err and "rewrites per rule" not in err
    _, _, err = run(capsys, "--check", "pkg/a.py")
    assert "summary" not in err


# --- the progress bar ----------------------------------------------------------------


def test_no_progress_bar_when_stdout_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for n in range(5):
        put(f"pkg/t{n}.py")
    _, out, err = run(capsys, "--check", "pkg")
    assert "migrating" not in err and "migrating" not in out


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
@pytest.mark.parametrize("quiet", [False, True])
def test_progress_bar_on_a_terminal_unless_quiet(tmp_path: Path, quiet: bool) -> None:
    import pty

    for n in range(4):
        put(f"pkg/t{n}.py")
    argv = [sys.executable, "-m", "accel_migrate", "--check", "-j", "1", "pkg"]
    if quiet:
        argv.append("-q")
    # slow the files down, so that the bar is drawn at least once
    code = (
        "import time, sys\n"
        "import accel_migrate.cli.batch as b\n"
        "real = b.migrate_file\n"
        "def slow(*a):\n"
        "    time.sleep(0.5)\n"
        "    return real(*a)\n"
        "b.migrate_file = slow\n"
        "b.Batch.__init__.__kwdefaults__['task'] = slow\n"
        "from accel_migrate.cli import main\n"
        f"sys.exit(main({argv[3:]!r}))\n"
    )
    controller, terminal = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=terminal,
        stderr=terminal,
        cwd=tmp_path,
        env=env,
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(controller)
    shown = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == EXIT_WOULD_CHANGE
    assert ("migrating" in shown) is not quiet
    assert "4 files would be migrated" in shown


# --- what an already-distributed entry point imports ----------------------------------

HOGWILD_MAIN = """\
import torch
import torch.multiprocessing as mp

from train import train

model = torch.nn.Linear(2, 2)
model.share_memory()
workers = [mp.Process(target=train, args=(rank, model)) for rank in range(2)]
"""

LIBRARY = TRAIN.replace(
    "model = torch.nn.Linear",
    "def train(rank, model):\n    pass\n\n\nmodel = torch.nn.Linear",
)

DDP_LAUNCHER = """\
import torch.distributed as dist

from .engine import fit

dist.init_process_group("gloo")
fit()
"""


def _by_path(document: dict) -> dict[str, dict]:
    return {entry["path"]: entry for entry in document["files"]}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_library_of_an_already_distributed_script_is_left_alone(
    jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    put("proj/main.py", HOGWILD_MAIN)
    put("proj/train.py", LIBRARY)
    put("proj/single.py", TRAIN)  # not imported by main.py: migrated as usual
    code, out, _ = run(capsys, "--write", "-j", jobs, "--output-format", "json", "proj")
    assert code == EXIT_OK
    files = _by_path(json.loads(out))
    assert Path("proj/train.py").read_text() == LIBRARY
    library = files["proj/train.py"]
    assert library["skip_reason"] == "already distributed"
    [finding] = library["findings"]
    assert (finding["code"], finding["status"]) == ("AM100", "info")
    assert finding["message"] == (
        "imported by proj/main.py, which is already distributed; left unchanged"
    )
    assert files["proj/main.py"]["skip_reason"] == "already distributed"
    assert files["proj/single.py"]["status"] == "changed"
    assert Path("proj/single.py").read_text() != TRAIN
    # the order of the report is the order the files were found
    assert list(files) == ["proj/main.py", "proj/single.py", "proj/train.py"]


def test_the_library_alone_is_migrated(capsys: pytest.CaptureFixture[str]) -> None:
    """Migrated without its distributed importer, it is a training script (so the
    test above shows the project pass at work, not the screen)."""
    put("proj/main.py", HOGWILD_MAIN)
    put("proj/train.py", LIBRARY)
    code, _, _ = run(capsys, "--check", "proj/train.py")
    assert code == EXIT_WOULD_CHANGE


def test_relative_and_package_imports_are_followed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``from .engine import fit`` in a package, and what engine imports in turn
    (``from pkg import steps``); a module nobody imports is migrated."""
    put("repo/pkg/__init__.py", "")
    put("repo/pkg/launch.py", DDP_LAUNCHER)
    put(
        "repo/pkg/engine.py", "from pkg import steps\n\n\ndef fit():\n    steps.run()\n"
    )
    put("repo/pkg/steps.py", LIBRARY.replace("def train(rank, model)", "def run()"))
    put("repo/pkg/other.py", TRAIN)
    code, out, _ = run(capsys, "--check", "--output-format", "json", "repo")
    assert code == EXIT_WOULD_CHANGE  # other.py
    files = _by_path(json.loads(out))
    assert files["repo/pkg/steps.py"]["findings"][0]["message"] == (
        "imported by repo/pkg/launch.py, which is already distributed; left unchanged"
    )
    assert files["repo/pkg/steps.py"]["status"] == "skipped"
    assert files["repo/pkg/other.py"]["status"] == "changed"


def test_a_name_like_a_local_module_in_a_plain_script_changes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A single-GPU script importing its library: both migrate (the pass only acts
    on already-distributed importers)."""
    put("proj/main.py", "from train import train\n" + TRAIN)
    put("proj/train.py", LIBRARY)
    code, out, _ = run(capsys, "--check", "--output-format", "json", "proj")
    assert code == EXIT_WOULD_CHANGE
    files = _by_path(json.loads(out))
    assert {p: f["status"] for p, f in files.items()} == {
        "proj/main.py": "changed",
        "proj/train.py": "changed",
    }
