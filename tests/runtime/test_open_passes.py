"""Batches of different shares yielded since the last backward: the
runtime cannot tell which of them a loss is computed from, so it refuses the
backward with a ShardingError that names the open evaluation pass (Reptile's
``next(test_iter)`` of an endless generator, its global batch of 3 rows split
2/1 at two processes) as well as a loss that reads both batches. An earlier
version weighed only the passes whose forward's output the loss's graph
reaches; a batch first run through a no-grad or detached forward and then
read again (pseudo-labels) was then weighed wrongly with no error. Two
processes under the launcher (gloo)."""

from __future__ import annotations

import subprocess

import pytest

from tests import warm_python

from .test_distributed import SCRIPTS, plain

pytestmark = pytest.mark.multiprocess


def _launch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *warm_python.launcher(),
            "--nproc",
            "2",
            str(SCRIPTS / "open_eval_pass.py"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )


@pytest.mark.parametrize("mode", [(), ("both",)], ids=["open_pass", "both"])
def test_batches_of_different_shares_before_a_backward_are_refused(
    mode: tuple[str, ...],
) -> None:
    assert plain("open_eval_pass.py", *mode).count("step ") == 4
    done = _launch(*mode)
    out = done.stderr + done.stdout
    assert done.returncode != 0, out
    assert "ShardingError" in out, out
    assert "cannot tell which of them this loss is computed from" in out, out
    assert "(2 of 4, 2 of 3 samples)" in out or "(2 of 3, 2 of 4 samples)" in out, out
