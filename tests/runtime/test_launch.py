"""The launcher with real processes: a failing rank, a collective one rank skips,
and two launchers as two nodes on loopback."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests import warm_python
from tests.conftest import FIXTURES
from tests.parity.harness import STEP_LOSS, migrate_to

pytestmark = pytest.mark.multiprocess

SCRIPTS = Path(__file__).parent / "scripts"
LAUNCH = ["-m", "accel_migrate", "launch"]


def _run(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [warm_python.executable(), *LAUNCH, *args],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(timeout),
        check=False,
        env=env,
    )
    return done, time.monotonic() - start


def test_a_failing_rank_stops_the_job_with_one_traceback(tmp_path: Path) -> None:
    done, seconds = _run(
        "--nproc",
        "2",
        str(SCRIPTS / "rank_raises.py"),
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert done.returncode == 1
    assert seconds < 30
    err = done.stderr
    assert err.count("Traceback") == 1, err
    assert "[rank1]: ValueError: bad batch on rank 1" in err
    assert err.index("bad batch on rank 1") < err.index(
        "[rank0]: stopped:"
    ), "the root cause comes first"
    assert "error: the job failed: rank 1" in err
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert leftovers == [], "the launcher's bookkeeping and torchrun's logs are removed"


def test_a_collective_one_rank_skips_times_out_with_a_named_message() -> None:
    done, seconds = _run(
        "--nproc", "2", "--timeout", "5", str(SCRIPTS / "rank_skips_collective.py")
    )
    assert done.returncode == 1
    assert seconds < 60, "the timeout, not the 120 s sleep, ends the job"
    assert (
        "rank 0: all_reduce (sum) did not complete within 5 s" in done.stderr
    ), done.stderr


def test_two_nodes_on_loopback_train_like_one(
    tmp_path: Path, rendezvous_port: int
) -> None:
    script = migrate_to(FIXTURES / "parity" / "mlp_regression.py", tmp_path)
    single, _ = _run("--nproc", "2", str(script))
    assert single.returncode == 0, single.stderr
    endpoint = f"127.0.0.1:{rendezvous_port}"
    nodes = [
        subprocess.Popen(
            [
                warm_python.executable(),
                *LAUNCH,
                "--nnodes",
                "2",
                "--node-rank",
                str(rank),
                "--rdzv-endpoint",
                endpoint,
                "--rdzv-id",
                "loopback",
                "--nproc",
                "2",
                str(script),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [node.communicate(timeout=warm_python.timeout(180)) for node in nodes]
    assert all(node.returncode == 0 for node in nodes), [err for _, err in outputs]
    four = [float(v) for out, _ in outputs for _, v in STEP_LOSS.findall(out)]
    two = [float(v) for _, v in STEP_LOSS.findall(single.stdout)]
    assert len(four) == len(two) > 0
    assert max(abs(a - b) / abs(b) for a, b in zip(four, two, strict=True)) < 1e-5


def test_a_killed_job_resumes_to_the_same_parameters(tmp_path: Path) -> None:
    import torch

    script = str(SCRIPTS / "resume.py")
    whole, _ = _run(
        "--nproc",
        "2",
        script,
        str(tmp_path / "state-a"),
        str(tmp_path / "whole.pt"),
        "--no-kill",
    )
    assert whole.returncode == 0, whole.stderr
    resumed, _ = _run(
        "--nproc",
        "2",
        "--max-restarts",
        "1",
        script,
        str(tmp_path / "state-b"),
        str(tmp_path / "resumed.pt"),
    )
    assert resumed.returncode == 0, resumed.stderr
    # torchrun names as "first" the failure with the earliest timestamp, in whole
    # seconds: rank 1's SIGKILL, the SIGTERM it then sends rank 0, or rank 0's
    # own stop (exit 1) once the runtime sees rank 1's connection close first,
    # whichever wins the race (CI27 saw the third).
    first = re.search(r"failed \(exitcode: (-9|-15|1)\)", resumed.stderr)
    assert first is not None, resumed.stderr
    if first.group(1) == "1":
        assert "another process of the job closed its connection" in (
            resumed.stderr
        ), resumed.stderr
    assert "attempt 1 starts at epoch 1 step 4" in resumed.stdout
    expected, got = torch.load(tmp_path / "whole.pt"), torch.load(
        tmp_path / "resumed.pt"
    )
    for name, tensor in expected.items():
        assert torch.equal(got[name], tensor), name
    losses = [line for line in resumed.stdout.splitlines() if " loss " in line]
    assert (
        losses[-1]
        == [line for line in whole.stdout.splitlines() if " loss " in line][-1]
    )
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert leftovers == [], "no incomplete state folder is left behind"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--strategy", "fsdp"), "updates made by hand"),
        (("--precision", "fp16"), "no prepared optimizer"),
    ],
    ids=["fsdp", "fp16"],
)
def test_parameters_updated_by_hand_are_refused_where_unsupported(
    options: tuple[str, ...], message: str
) -> None:
    done, _ = _run("--nproc", "1", *options, str(SCRIPTS / "manual_sgd.py"))
    assert done.returncode == 1
    assert message in done.stderr, done.stderr
    assert "trained" not in done.stdout


def test_parameters_updated_by_hand_train_under_ddp() -> None:
    done, _ = _run("--nproc", "1", "--strategy", "ddp", str(SCRIPTS / "manual_sgd.py"))
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout


def test_an_abort_after_every_rank_finished_does_not_fail_the_job() -> None:
    """torch 2.13's gloo teardown now and then aborts one rank at exit; when every
    rank had finished its script, the job succeeded and says so."""
    done, _ = _run("--nproc", "2", str(SCRIPTS / "abort_at_exit.py"), "finished")
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout
    assert "aborted in torch's process-group teardown after its script" in done.stderr


def test_an_abort_before_the_work_is_done_fails_the_job() -> None:
    done, _ = _run("--nproc", "2", str(SCRIPTS / "abort_at_exit.py"), "early")
    assert done.returncode == 1
    assert "error: the job failed: rank 1" in done.stderr
