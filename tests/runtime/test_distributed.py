"""Runtime behaviour that needs real processes (torchrun, gloo): fp16 loss scaling,
FSDP's parameter remapping, and checkpoint round trips between DDP, FSDP and plain
PyTorch."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn

from tests import warm_python

pytestmark = pytest.mark.multiprocess

SCRIPTS = Path(__file__).parent / "scripts"
STEP_LOSS = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)


def launch(
    script: str, *args: str, nproc: int = 2, options: tuple[str, ...] = ()
) -> str:
    command = [
        *warm_python.launcher(),
        "--nproc",
        str(nproc),
        *options,
    ]
    done = subprocess.run(
        [*command, str(SCRIPTS / script), *args],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def plain(script: str, *args: str) -> str:
    done = subprocess.run(
        [warm_python.executable(), str(SCRIPTS / script), *args],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_fp16_skips_exactly_the_step_with_an_inf(strategy: str) -> None:
    out = launch("fp16_inf.py", options=("--strategy", strategy, "--precision", "fp16"))
    rows = re.findall(
        r"rank (\d) step (\d) changed (True|False) dtype (torch\.[a-z]+\d+)", out
    )
    assert len(rows) == 12, out
    for rank, step, changed, dtype in rows:
        assert changed == (
            "False" if step == "3" else "True"
        ), f"rank {rank} step {step}"
        assert dtype == (
            "torch.float16" if strategy == "ddp" else "torch.float32"
        ), dtype


@pytest.mark.parametrize("order", ["before", "after", "unprepared", "resumed"])
def test_fsdp_remaps_optimizers_built_in_any_order(order: str) -> None:
    expected = [
        float(v) for _, v in STEP_LOSS.findall(plain("optimizer_order.py", order))
    ]
    got = [
        float(v)
        for _, v in STEP_LOSS.findall(
            launch("optimizer_order.py", order, options=("--strategy", "fsdp"))
        )
    ]
    assert len(got) == len(expected) == 4
    for step, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert abs(g - e) <= 1e-5 * abs(e), f"step {step}: {g} vs {e}"
    assert got[-1] < got[0], "it trained"


def test_fsdp_refuses_a_resumed_optimizer_over_two_models_on_every_rank() -> None:
    done = subprocess.run(
        [
            *warm_python.launcher(),
            "--nproc",
            "2",
            "--strategy",
            "fsdp",
            str(SCRIPTS / "optimizer_order.py"),
            "resumed_two_models",
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(
            180
        ),  # a rank left waiting in a collective would hang until this
        check=False,
    )
    assert done.returncode != 0
    message = "an optimizer over the parameters of several prepared models"
    assert done.stderr.count(message) >= 2, done.stderr  # both ranks, no hang
    assert "expected an error" not in done.stderr


class Net(nn.Module):
    """The class of tests/runtime/scripts/checkpoints.py, as the original script has it."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(6, 10)
        self.head = nn.Linear(10, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.encoder(x)))


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    torch.manual_seed(42)
    reference = Net()
    folders = {}
    for strategy in ("ddp", "fsdp"):
        folder = tmp_path_factory.mktemp(strategy)
        torch.save(reference.state_dict(), folder / "plain.pt")
        out = launch("checkpoints.py", str(folder), options=("--strategy", strategy))
        assert "saved" in out
        folders[strategy] = folder
    return folders


def _plain_training(folder: Path) -> tuple[Net, torch.optim.Adam]:
    model = Net()
    model.load_state_dict(torch.load(folder / "plain.pt"))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(0)
    data, target = torch.randn(8, 6), torch.randn(8, 3)
    for _ in range(2):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(data), target).backward()
        optimizer.step()
    return model, optimizer


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_checkpoints_load_into_the_original_classes(
    checkpoints: dict[str, Path], strategy: str
) -> None:
    folder = checkpoints[strategy]
    expected_model, expected_optimizer = _plain_training(folder)

    model = Net()
    model.load_state_dict(
        torch.load(folder / "2-model.pt")
    )  # strict: same keys, no prefix
    for name, tensor in expected_model.state_dict().items():
        torch.testing.assert_close(
            model.state_dict()[name], tensor, rtol=1e-5, atol=1e-6
        )

    saved = torch.load(folder / "2-optimizer.pt")
    reference = expected_optimizer.state_dict()
    assert [g["params"] for g in saved["param_groups"]] == [
        g["params"] for g in reference["param_groups"]
    ]
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    optimizer.load_state_dict(saved)
    for index, state in reference["state"].items():
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(
                saved["state"][index][key], state[key], rtol=1e-5, atol=1e-7
            )


def test_ddp_and_fsdp_checkpoints_agree(checkpoints: dict[str, Path]) -> None:
    ddp = torch.load(checkpoints["ddp"] / "2-model.pt")
    fsdp = torch.load(checkpoints["fsdp"] / "2-model.pt")
    assert list(ddp) == list(fsdp)
    for key in ddp:
        torch.testing.assert_close(ddp[key], fsdp[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_share_without_tokens_trains_as_one_process(strategy: str) -> None:
    # Before empty_share.py, rank 1's 0/0 token mean made every gradient NaN.
    expected = plain("masked_share.py")
    assert "nan" not in expected and expected.count("step ") == 4, expected
    out = launch("masked_share.py", options=("--strategy", strategy))
    assert STEP_LOSS.findall(out) == STEP_LOSS.findall(expected), out
    assert re.findall(r"params (\S+)", out) == re.findall(r"params (\S+)", expected)
