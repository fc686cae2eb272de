"""verify's comparison of the final parameters: elements whose gradients were
rounding alone in the original (a fused qkv's key bias under Adam) are left out
and named, a parameter near zero is compared to the movement its optimizer can
make, and a real difference still fails."""

from __future__ import annotations

import math

import pytest
import torch

from accel_migrate.cli.verify_report import summary
from accel_migrate.verify import runner
from accel_migrate.verify.compare import compare
from accel_migrate.verify.facts import step_bounds

D = 8


class _Attention(torch.nn.Module):
    """One head of self-attention with nanoGPT's fused c_attn (q, k, v thirds)."""

    def __init__(self) -> None:
        super().__init__()
        self.c_attn = torch.nn.Linear(D, 3 * D)
        self.head = torch.nn.Linear(D, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(x).split(D, dim=-1)
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D), dim=-1)
        return self.head(att @ v)


def _record(parameters: list[dict], steps: int = 4, **extra: object) -> dict:
    return {
        "losses": [1.0, 0.5],
        "loss_steps": [0, 1],
        "steps": steps,
        "parameters": parameters,
        "facts": {},
        **extra,
    }


def _row(numel: int, total: float, sumsq: float, traced: dict | None = None) -> dict:
    row: dict = {"numel": numel, "sum": total, "sumsq": sumsq}
    if traced is not None:
        row["traced"] = traced
    return row


def test_the_key_bias_of_a_fused_qkv_is_rounding_alone_under_adam() -> None:
    """Softmax ignores the key bias (it adds one number to a whole row of
    scores): its gradient is rounding, so the original's masks name exactly the
    key third of c_attn.bias, and the checksums leave it out of ``traced``."""
    torch.manual_seed(0)
    model = _Attention()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    recorder = runner.Recorder(3, "original")
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 5, D)).square().mean().backward()
        recorder.before_step(optimizer)
        optimizer.step()
        try:
            recorder.on_step(optimizer)
        except runner.StopVerification:
            break
    masks = recorder.rounding_masks()
    names = [name for name, _ in model.named_parameters()]
    masked = {names[i]: m for i, m in enumerate(masks) if m is not None}
    assert list(masked) == ["c_attn.bias"]
    assert masked["c_attn.bias"].tolist() == [False] * D + [True] * D + [False] * D
    recorder.rounding = masks
    rows = recorder.parameters()
    assert rows[names.index("c_attn.bias")]["traced"]["numel"] == 2 * D
    assert all(
        "traced" not in r for i, r in enumerate(rows) if names[i] != "c_attn.bias"
    )
    assert step_bounds(optimizer) == [1e-3] * len(names)
    assert step_bounds(torch.optim.SGD(model.parameters(), lr=0.1)) == [0.0] * len(
        names
    )


def test_a_parameter_apart_only_in_its_rounding_elements_passes_with_a_note() -> None:
    weight = _row(4, 2.0, 1.5)
    traced = {"numel": 2, "sum": 0.3, "sumsq": 0.05}
    original = _record([weight, _row(3, 0.31, 0.0501, traced)])
    noisy = _record([weight, _row(3, 0.33, 0.0509, traced)])  # the key third moved
    verdict = compare(original, noisy, 1e-5, 2)
    assert verdict.agrees and verdict.parameter_error == 0.0
    line = summary(verdict)
    assert line.startswith("PASS:") and "note: 1 parameter differs only" in line
    assert "1 element whose gradients were rounding alone" in line
    # a real update difference (in the elements the loss reads) still fails
    moved = {"numel": 2, "sum": 0.31, "sumsq": 0.0521}
    broken = _record([weight, _row(3, 0.34, 0.0522, moved)])
    failed = compare(original, broken, 1e-5, 2)
    assert not failed.agrees and failed.rounding_apart is None
    assert failed.causes == (
        "the losses agree but the final parameters do not: an update the loss does "
        "not show",
    )
    assert summary(failed).startswith("FAIL: steps 4 vs 4, parameter error")


def test_a_parameter_near_zero_is_compared_to_the_movement_adam_can_make() -> None:
    """A BatchNorm bias from 0 after 4 steps of Adam (lr 1e-3, 16 elements) is
    made of its updates alone: bf16 flips some of them. Its error is relative to
    lr x steps x sqrt(numel) = 0.016, not to its own norm 0.008; an error of
    the same size (an update of the wrong size) still fails, and so does
    anything without the bound (SGD)."""
    original = _record([_row(16, 0.02, 6.3e-5)], step_bounds=[1e-3])
    bf16 = _record([_row(16, 0.02045, 6.5e-5)])  # measured: 5.7e-2 of its norm
    assert compare(original, bf16, 5e-2, 2).agrees
    assert compare(original, bf16, 5e-2, 2).parameter_error == pytest.approx(
        4.5e-4 / 0.016, rel=1e-2
    )
    wrong = _record([_row(16, 0.0295, 1.1e-4)])  # a step of the wrong size
    assert not compare(original, wrong, 5e-2, 2).agrees
    sgd = _record([_row(16, 0.02, 6.3e-5)], step_bounds=[0.0])
    assert not compare(sgd, bf16, 5e-2, 2).agrees
