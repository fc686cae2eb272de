"""``bench/gpu_check.sh``'s status, run on the CPU with a stand-in Python that
says it has CUDA and answers each pytest part with a given status: a part whose
tests the arguments all deselect (pytest's 5) does not fail the check, but a run
in which no part selected a test does (a ``-k`` that matched nothing had passed,
having checked nothing)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "bench" / "gpu_check.sh"

#: Stands in for the venv's Python: CUDA "available", each ``-m pytest`` part
#: exits with the next status of $STATUSES (one per line, in the parts' order).
FAKE_PYTHON = """#!/usr/bin/env bash
case "$1" in
  -c) exit 0 ;;
  -) cat >/dev/null; echo "torch (stand-in)"; exit 0 ;;
esac
n=$(cat "$COUNTER" 2>/dev/null || echo 0)
echo $((n + 1)) > "$COUNTER"
exit "$(sed -n "$((n + 1))p" "$STATUSES")"
"""


def _check(
    tmp_path: Path, statuses: list[int], deepspeed: bool = False
) -> tuple[int, str]:
    root = tmp_path / "repo"
    (root / "bench").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "bench" / "gpu_check.sh")
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    if deepspeed:
        (root / ".venv-deepspeed" / "bin").mkdir(parents=True)
        shutil.copy(fake, root / ".venv-deepspeed" / "bin" / "python")
    (tmp_path / "statuses").write_text("".join(f"{s}\n" for s in statuses))
    done = subprocess.run(
        ["bash", str(root / "bench" / "gpu_check.sh"), "-k", "nothing"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHON": str(fake),
            "STATUSES": str(tmp_path / "statuses"),
            "COUNTER": str(tmp_path / "counter"),
        },
    )
    return done.returncode, done.stdout


@pytest.mark.parametrize("deepspeed", [False, True])
def test_a_run_that_selected_no_test_anywhere_fails(
    tmp_path: Path, deepspeed: bool
) -> None:
    status, said = _check(tmp_path, [5, 5, 5], deepspeed)
    assert status == 5, said
    assert said.count("select no test in this part") == (3 if deepspeed else 2)
    assert "select no test in any part: nothing was checked" in said


def test_a_part_that_selected_nothing_beside_one_that_passed_passes(
    tmp_path: Path,
) -> None:
    status, said = _check(tmp_path, [5, 0])
    assert status == 0, said
    assert "scale and offload: the arguments select no test in this part" in said
    assert "nothing was checked" not in said


def test_a_failing_part_fails_the_check(tmp_path: Path) -> None:
    status, said = _check(tmp_path, [1, 5], deepspeed=False)
    assert status == 1, said
