"""A run that hangs must come back from the harness as a timeout, within seconds of
it, with every process it started gone: the soundness corpus classifies that as
HANG, and a process left behind (or a pipe it holds open) would stall the suite
instead. The hard shape: the hang inside DataLoader worker processes, below
torchrun's workers, each of which torchrun starts in a session of its own."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests import warm_python

from .harness import _environment, run_launched

pytestmark = pytest.mark.multiprocess

#: Every process of the run records its PID in ``--pids`` (the folder): the ranks
#: at start, their DataLoader workers before they wait in a barrier forever (the
#: worker's forked copy of the group has no peer there, and no timeout).
SCRIPT = """
import argparse, os
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--out")
parser.add_argument("--pids")
args = parser.parse_args()


def record(kind):
    open(os.path.join(args.pids, f"{kind}-{os.getpid()}"), "w").close()


class Samples(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        if dist.is_initialized():
            record("worker")
            dist.barrier()
        return torch.tensor([float(index)])


dist.init_process_group("gloo")
record("rank")
loader = DataLoader(Samples(), batch_size=2, num_workers=2)
for step, batch in enumerate(loader):
    print(f"step {step} loss {batch.sum().item()}", flush=True)
"""


def _alive(pid: int) -> bool:
    stat = warm_python.process_stat(pid)
    return stat is not None and stat.state != "Z"


def _marked(mark: str) -> set[int]:
    """Processes whose environment has ``mark`` (the shims and real interpreters
    the run exec'd; a warm fork's /proc environ is its server's)."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    if mark.encode() in environ.read():
                        found.add(int(name))
            except OSError:
                pass
    return found


def test_a_hang_in_dataloader_workers_times_out_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "hang_in_workers.py"
    script.write_text(SCRIPT)
    # The warm servers first (tests/warm_python.py), so that the mark is only in
    # the environment of what this run starts.
    warm_python.environment(_environment())
    mark = f"accel-migrate-timeout-{uuid.uuid4().hex}"
    monkeypatch.setenv("ACCEL_MIGRATE_TEST_MARK", mark)
    # A loaded machine may not reach the workers in the first timeout: once more,
    # longer, before calling that a failure.
    for timeout in (10, 30):
        pids = tmp_path / f"pids-{timeout}"
        pids.mkdir()
        started = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            run_launched(script, tmp_path, 2, "--pids", str(pids), timeout=timeout)
        assert time.monotonic() - started < timeout + 15
        recorded = {int(path.name.partition("-")[2]) for path in pids.iterdir()}
        started = time.monotonic()
        while True:
            left = {pid for pid in recorded | _marked(mark) if _alive(pid)}
            if not left or time.monotonic() - started > 5:
                break
            time.sleep(0.2)
        assert not left, f"left running after the timeout: {sorted(left)}"
        if any(path.name.startswith("worker-") for path in pids.iterdir()):
            break
    else:
        pytest.fail("the DataLoader workers were not reached within 30 s")
    assert len([p for p in pids.iterdir() if p.name.startswith("rank-")]) == 2
