"""A rank that fails while its peer has a loss reduction in flight: the job's
output is the failing rank's traceback, once, and one line per other rank."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import warm_python

pytestmark = pytest.mark.multiprocess

SCRIPT = Path(__file__).parent / "scripts" / "peer_raises_in_reduction.py"


def test_a_peer_crash_during_a_loss_reduction_prints_one_traceback(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            *warm_python.launcher(),
            "--nproc",
            "2",
            str(SCRIPT),
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    err = done.stderr
    assert done.returncode == 1, err
    # Before: rank 0's exit hook waited for the reduction and printed
    # "Exception ignored in atexit callback ... PeerFailedError" with a traceback.
    assert "Exception ignored" not in err, err
    assert "PeerFailedError" not in err, err
    assert err.count("Traceback") == 1, err
    assert err.count("[rank1]: ValueError: bad batch on rank 1") == 1, err
    [stopped] = [line for line in err.splitlines() if line.startswith("[rank0]:")]
    assert stopped.startswith("[rank0]: stopped: ") and "another process" in stopped
    assert "pair.cc" not in err, "gloo's own message is not the user's"
    assert "error: the job failed: rank 1" in err
