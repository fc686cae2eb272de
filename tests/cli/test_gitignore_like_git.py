"""cli/ignore.py answers as git does, entry by entry, on the idioms where pathspec
does not (why accel-migrate keeps its own matcher; issue 15).

The walk asks about each folder before it enters it and prunes ignored folders.
With pathspec 1.1 in its place (tried: ``check_file``, a trailing slash for
folders), two of these five cases fail with either flavour: ``GitIgnoreSpec``
calls a folder ignored under the whitelist idiom ``*`` / ``!*/`` / ``!*.py`` (the
walk would skip every folder) and under ``src/data/**``; ``PathSpec("gitignore")``
keeps a file inside a folder that ``!src/`` re-includes after ``**`` (git ignores
it) and misjudges ``src/data/**`` too. The judge here is git itself:
``git ls-files --others --exclude-standard``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from accel_migrate.cli.config import Settings
from accel_migrate.cli.files import discover

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

FILES = (
    "train.py",
    "notes.txt",
    "src/model.py",
    "src/data/loader.py",
    "src/data/cache.bin",
    "scripts/run.py",
    "scripts/old/run_v1.py",
    "docs/conf.py",
)

CASES = {
    "whitelist": "*\n!*/\n!*.py\n",
    "everything-but-a-folder": "**\n!src/\n",
    "reinclude-inside-ignored-parent": "scripts/*\n!scripts/run.py\n",
    "anchored-and-double-star": "/docs\n**/old/\n",
    "folder-contents": "src/data/**\n!src/data/loader.py\n",
}


def git_keeps(repo: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return sorted(p for p in listed if p.endswith(".py"))


@pytest.mark.parametrize("gitignore", CASES.values(), ids=list(CASES))
def test_the_walk_keeps_what_git_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gitignore: str
) -> None:
    repo = tmp_path / "repo"
    for name in FILES:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("x = 1\n")
    (repo / ".gitignore").write_text(gitignore)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    monkeypatch.chdir(repo)
    ours = sorted(discover(["."], Settings(exclude=(), base=repo)))
    assert [p.removeprefix("./") for p in ours] == git_keeps(repo)
