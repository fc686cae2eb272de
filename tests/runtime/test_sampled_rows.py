"""The rows ``accel.gather`` brings back from the shares of a sharded loader are
the original batch's, in its order, also for a last batch shorter than the world
(an empty share): what AM044 relies on when it gathers the samples a script saves
every N steps."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import warm_python


@pytest.mark.multiprocess
def test_gathered_rows_are_the_original_batch_in_order() -> None:
    script = str(Path(__file__).parent / "scripts" / "sampled_rows.py")
    outputs = {}
    for name, command in (
        ("original", [warm_python.executable(), script]),
        ("world2", [*warm_python.launcher(), "--nproc", "2", script]),
    ):
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=warm_python.timeout(180),
            check=False,
        )
        assert done.returncode == 0, f"{name}\n{done.stdout}\n{done.stderr}"
        outputs[name] = [
            line
            for line in done.stdout.splitlines()
            if line.startswith(("rows", "values"))
        ]
    assert len(outputs["original"]) == 18  # 2 epochs of 3 batches, three lines each
    assert "rows 0 2 [" in outputs["original"][6]  # the last batch: one row
    assert "rows joined 0 2 [" in outputs["original"][7]
    assert outputs["world2"] == outputs["original"]
