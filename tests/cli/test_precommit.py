"""The hooks of .pre-commit-hooks.yaml, run by the real ``pre-commit`` in a fresh git
repository. Offline: the hooks are copied into the repository's own config as
``repo: local`` hooks (``language: system``, the installed ``accel-migrate``), so
pre-commit installs nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pre_commit  # noqa: F401  (a dev dependency: the tests run the real one)
import pytest
import yaml

from tests.conftest import ROOT

from .test_cli import TRAIN

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())


def entry_point() -> str:
    script = Path(sys.executable).with_name("accel-migrate")
    if script.exists():
        return str(script)
    found = shutil.which("accel-migrate")
    if found is None:
        pytest.skip("the accel-migrate entry point is not installed")
    return found


def local_config(hook_id: str) -> str:
    [hook] = [h for h in HOOKS if h["id"] == hook_id]
    command = hook["entry"].split()
    assert command[0] == "accel-migrate"
    local = {
        **hook,
        "entry": " ".join([entry_point(), *command[1:]]),
        "language": "system",
    }
    return yaml.safe_dump({"repos": [{"repo": "local", "hooks": [local]}]})


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def make_repo(tmp_path: Path, hook_id: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", ".")
    (repo / ".pre-commit-config.yaml").write_text(local_config(hook_id))
    (repo / "train.py").write_text(TRAIN)
    (repo / "util.py").write_text("def add(a, b):\n    return a + b\n")
    git(repo, "add", ".")
    return repo


def run_pre_commit(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
        "PRE_COMMIT_COLOR": "never",
    }
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_hooks_file_declares_a_fixing_and_a_checking_hook() -> None:
    by_id = {hook["id"]: hook for hook in HOOKS}
    assert set(by_id) == {"accel-migrate", "accel-migrate-check"}
    assert "--write" in by_id["accel-migrate"]["entry"]
    assert "--check" in by_id["accel-migrate-check"]["entry"]
    for hook in HOOKS:
        assert hook["language"] == "python"
        assert hook["types"] == ["python"]
        assert "--force-exclude" in hook["entry"]


def test_the_fixing_hook_fails_and_fixes_then_passes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, "accel-migrate")
    first = run_pre_commit(repo, tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "Failed" in first.stdout
    assert "files were modified by this hook" in first.stdout
    migrated = (repo / "train.py").read_text()
    assert "accel.backward(loss)" in migrated
    assert (repo / "util.py").read_text() == "def add(a, b):\n    return a + b\n"
    git(repo, "add", ".")
    second = run_pre_commit(repo, tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Passed" in second.stdout
    assert (repo / "train.py").read_text() == migrated


def test_the_checking_hook_fails_without_touching_the_file(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, "accel-migrate-check")
    result = run_pre_commit(repo, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Failed" in result.stdout
    assert "+    accel.backward(loss)" in result.stdout
    assert (repo / "train.py").read_text() == TRAIN


# --- the documented snippet, with its tag as rev ------------------------------------


def documented_snippet() -> dict:
    """The ``.pre-commit-config.yaml`` that docs/repositories.md tells users to write."""
    text = (ROOT / "docs" / "repositories.md").read_text()
    section = text[text.index("## Pre-commit") :]
    block = section[section.index("```yaml\n") + len("```yaml\n") :]
    return yaml.safe_load(block[: block.index("```")])


def test_the_documented_snippet_runs_with_its_tag_as_rev(tmp_path: Path) -> None:
    """pre-commit itself fetches ``rev`` from the repository, installs the hook from
    that checkout and runs it. The release tag is made here, in a clone (the
    maintainer tags the real repository, see docs/repositories.md); offline, the
    hook's environment finds the dependencies on PYTHONPATH instead of an index."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    config = documented_snippet()
    [entry] = config["repos"]
    assert entry["rev"] == f"v{version}", "the documented rev is this version's tag"
    assert [hook["id"] for hook in entry["hooks"]] == ["accel-migrate"]

    upstream = tmp_path / "accel-migrate"
    git(tmp_path, "clone", "-q", "--no-local", str(ROOT), str(upstream))
    # -f: the clone carries the repository's own release tag once it is made; the
    # hook is tested as the clone's HEAD under the documented rev either way.
    git(upstream, "tag", "-f", entry["rev"])
    entry["repo"] = str(upstream)

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", ".")
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    (repo / "train.py").write_text(TRAIN)
    git(repo, "add", ".")
    import sysconfig

    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
        "PRE_COMMIT_COLOR": "never",
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of "build without isolation"
        "PYTHONPATH": os.pathsep.join(
            [sysconfig.get_paths()["purelib"], os.environ.get("PYTHONPATH", "")]
        ),
    }
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "files were modified by this hook" in result.stdout
    assert "accel.backward(loss)" in (repo / "train.py").read_text()
