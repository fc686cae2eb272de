"""A pass over a sharded loader left open by an evaluation (Reptile's
``next(test_iter)`` of an endless generator) whose share differs from the
training loader's: the next backward weighs its loss by the training batch's
share, since only that batch reaches the loss through the prepared model
(``runtime/share_claims.py``); a loss that reads both batches is refused with
a ShardingError that says so. Two processes under the launcher (gloo)."""

from __future__ import annotations

import re

import pytest

from tests import warm_python

from .test_distributed import SCRIPTS, STEP_LOSS, launch, plain

pytestmark = pytest.mark.multiprocess


def test_an_evaluation_pass_left_open_does_not_weigh_in_the_next_step() -> None:
    expected = plain("open_eval_pass.py")
    assert expected.count("step ") == 4, expected
    out = launch("open_eval_pass.py")
    assert STEP_LOSS.findall(out) == STEP_LOSS.findall(expected), out
    assert re.findall(r"params (\S+)", out) == re.findall(r"params (\S+)", expected)


def test_a_loss_reading_both_batches_is_refused_naming_both_shares() -> None:
    import subprocess

    done = subprocess.run(
        [
            *warm_python.launcher(),
            "--nproc",
            "2",
            str(SCRIPTS / "open_eval_pass.py"),
            "both",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode != 0
    assert (
        "this loss is computed from the batches of 2 sharded loaders"
        in done.stderr + done.stdout
    )
