"""The scale strategies on a GPU (issue 16): per-block FSDP and its options, HSDP
over two launcher "nodes" on loopback, and DeepSpeed ZeRO 1-3. Skipped, with the
reason, where CUDA (or DeepSpeed, or a second GPU) is missing; bench/gpu_check.sh
runs them, the DeepSpeed ones in ``.venv-deepspeed``. The CPU lane runs the same
scripts over gloo (tests/runtime/test_fsdp_blocks.py, test_hsdp.py,
tests/parity/test_parity_deepspeed.py); these check the NCCL and CUDA paths.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import FIXTURES
from tests.parity.harness import (
    max_parameter_error,
    migrate_to,
    relative_errors,
    run_launched,
    run_original,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device (NCCL); none here"
    ),
]

SCRIPTS = Path(__file__).parents[1] / "runtime" / "scripts"
LOSS = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)
#: DeepSpeed's band (docs/runtime.md, "Precision and tolerances"): exact for the
#: first steps, then reduction order shows under Adam.
EXACT_STEPS, EXACT, BAND = 2, 1e-5, 1e-2


def _gpus() -> int:
    return torch.cuda.device_count()


def _run(command: list[str], env: dict[str, str] | None = None, timeout: float = 240):
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=env, check=False
    )


def _losses(text: str) -> list[float]:
    return [float(v) for _, v in LOSS.findall(text)]


@pytest.mark.parametrize(
    ("options", "precision", "tolerance"),
    [
        ((), "fp32", 1e-5),
        (("--activation-checkpointing",), "fp32", 1e-5),
        (("--no-reshard-after-forward",), "fp32", 1e-5),
        ((), "bf16", 5e-2),
    ],
    ids=["blocks", "checkpointing", "no-reshard", "blocks-bf16"],
)
def test_per_block_fsdp_matches_the_plain_run(
    options: tuple[str, ...], precision: str, tolerance: float, tmp_path: Path
) -> None:
    script = SCRIPTS / "fsdp_blocks.py"
    plain = _run([sys.executable, str(script), "plain", str(tmp_path / "plain.pt")])
    assert plain.returncode == 0, plain.stderr
    launched = _run(
        [
            *(sys.executable, "-m", "accel_migrate", "launch"),
            *("--nproc", str(min(2, _gpus())), "--strategy", "fsdp"),
            *("--precision", precision, *options),
            *(str(script), "runtime", str(tmp_path / "fsdp.pt")),
        ]
    )
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert "units 7" in launched.stdout  # six blocks and the root
    expected, got = _losses(plain.stdout), _losses(launched.stdout)
    assert len(got) == len(expected) == 8
    assert max(relative_errors(expected, got)) < tolerance
    before = torch.load(tmp_path / "plain.pt")
    after = torch.load(tmp_path / "fsdp.pt", map_location="cpu")
    assert list(after) == list(before)
    if precision == "fp32":  # bf16's rounding moves small weights far, relatively
        assert max_parameter_error(before, after) < 1e-4


@pytest.mark.skipif(
    torch.cuda.device_count() < 2,
    reason="HSDP needs two nodes of their own GPUs: 2 or more GPUs, fewer here",
)
def test_hsdp_on_two_loopback_nodes_matches_the_plain_run(
    tmp_path: Path, rendezvous_port: int
) -> None:
    script = SCRIPTS / "hsdp.py"
    per_node = _gpus() // 2
    port = str(rendezvous_port)
    nodes = []
    for rank in (0, 1):
        # Each "node" sees its own GPUs, so local rank 0 of each is another device.
        visible = ",".join(str(rank * per_node + i) for i in range(per_node))
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
        nodes.append(
            subprocess.Popen(
                [
                    *(sys.executable, "-m", "accel_migrate", "launch"),
                    *("--nnodes", "2", "--node-rank", str(rank)),
                    *("--nproc", str(per_node), "--strategy", "hsdp"),
                    *("--master-addr", "127.0.0.1", "--master-port", port),
                    *(str(script), "runtime", str(tmp_path / "hsdp.pt")),
                    str(tmp_path / "state"),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        )
    plain = _run([sys.executable, str(script), "plain", str(tmp_path / "plain.pt")])
    outputs = [node.communicate(timeout=400) for node in nodes]
    assert all(node.returncode == 0 for node in nodes), [err for _, err in outputs]
    out = outputs[0][0]
    assert f"mesh (2, {per_node}) ('replicate', 'shard')" in out
    expected = dict(re.findall(r"^step (\d+) loss (\S+)$", plain.stdout, re.M))
    got = dict(re.findall(r"^step (\d+) loss (\S+)$", out, re.M))
    assert sorted(got) == sorted(expected) and expected
    for step, value in got.items():
        assert float(value) == pytest.approx(float(expected[step]), rel=1e-5), step
    before = torch.load(tmp_path / "plain.pt")
    after = torch.load(tmp_path / "hsdp.pt", map_location="cpu")
    assert max_parameter_error(before, after) < 1e-4


@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason='DeepSpeed is not installed: pip install "accel-migrate[deepspeed]"',
)
@pytest.mark.parametrize(
    ("stage", "precision"),
    [(1, "fp32"), (2, "fp32"), (3, "fp32"), (2, "bf16"), (3, "bf16")],
    ids=["zero1", "zero2", "zero3", "zero2-bf16", "zero3-bf16"],
)
def test_deepspeed_zero_matches_the_original(
    stage: int, precision: str, tmp_path: Path
) -> None:
    script = FIXTURES / "parity" / "mlp_regression.py"
    original = run_original(script, tmp_path)
    run = run_launched(
        migrate_to(script, tmp_path),
        tmp_path,
        min(2, _gpus()),
        launch=(
            *("--strategy", "deepspeed", "--zero-stage", str(stage)),
            *("--precision", precision),
        ),
        timeout=400,
    )
    errors = relative_errors(original.losses, run.losses)
    if precision == "fp32":
        assert max(errors[:EXACT_STEPS]) < EXACT, errors[:EXACT_STEPS]
        assert max(errors) < BAND, f"step {errors.index(max(errors))}"
        assert max_parameter_error(original.state, run.state) < BAND
    else:
        assert max(errors) < 5e-2, f"step {errors.index(max(errors))}"
        assert max_parameter_error(original.state, run.state) < 5e-2
