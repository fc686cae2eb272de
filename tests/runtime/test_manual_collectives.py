"""A model that DDP cannot average (two backward passes through one forward, the
first reaching the trunk and one head) is averaged by the runtime itself; its
buffers are broadcast from rank 0 exactly where torch's own DDP broadcasts them
(``runtime/strategies/ddp.py``), counted forward by forward at world 2 against a
DDP wrapper built by hand over the same model
(``scripts/manual_collectives.py``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests import warm_python

pytestmark = pytest.mark.multiprocess

SCRIPT = Path(__file__).parent / "scripts" / "manual_collectives.py"


def test_buffers_are_broadcast_where_ddp_broadcasts_them(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *warm_python.launcher(),
            *("--nproc", "2", "--batch-mode", "per-device"),
            str(SCRIPT),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    for rank in (0, 1):
        logs = json.loads((tmp_path / f"rank{rank}.json").read_text())
        by_hand = [row["broadcast"] for row in logs["by_hand"]["forwards"]]
        ddp = [row["broadcast"] for row in logs["ddp"]["forwards"]]
        # the first forward builds the wrapper (its own broadcast) and syncs the
        # buffers; each forward after a grad-enabled one outside no_sync syncs
        # them (the eval forward too); none after a no_sync or no-grad forward.
        # Before r32b the by-hand mode also broadcast after no_sync forwards
        # ([2, 1, 1, 1, 1, 1, 1, 0]).
        assert ddp == [2, 1, 1, 1, 0, 0, 1, 0], (rank, logs)
        assert by_hand == ddp, (rank, logs)
        # no broadcast in a backward; no all-reduce in a backward inside no_sync
        backwards = logs["by_hand"]["backwards"]
        assert all(row["broadcast"] == 0 for row in backwards), (rank, logs)
        # each step's two accel.backward calls: one all-reduce each where the
        # runtime averages (the first step has one more, not the averaging's:
        # it is there before r33b too); before r33b two each
        # (which parameters had a gradient, then the gradients): [5, 4, 4, 0, 0, 4]
        assert [row["all_reduce"] for row in backwards] == [3, 2, 2, 0, 0, 2], (
            rank,
            logs,
        )
