"""AM020 for an imported function that draws, called between training epochs
with a loader of the script (``imported_draws.epoch_draw``): the loader is
sharded, each process draws for its own share, and the draws move torch's
random state, from which a shuffled loader draws the next epoch's order, away
from the original's (a run at world 2 differs from the second epoch on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source

EVALUATE = """
import random

import numpy as np
import torch


def sampled_error(model, loader, times=10):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            mu = model(x)
            samples = mu + torch.randn(times, *mu.shape)
            total += (samples.mean(0) - y).abs().sum().item()
    return total


def noisy_error(model, loader, augment=False, *, jitter=None):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            if augment:
                x = x + 0.01 * torch.randn_like(x)
            if jitter:
                x = x.clone().normal_()
            total += (model(x) - y).abs().sum().item()
    return total


def numpy_error(model, loader):
    total = 0.0
    for x, y in loader:
        k = random.randint(0, 0) + int(np.random.rand() > 2.0)
        total += (model(x) - y).abs().sum().item() + k
    return total


def plain_error(model, loader):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += (model(x) - y).abs().sum().item()
    return total
"""

MAIN = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from evaluate import noisy_error, numpy_error, plain_error, sampled_error

train_loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8, shuffle=True)
test_loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=8)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    for x, y in train_loader:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
{between}
{after}
"""


def _am020(tmp_path: Path, between: str, after: str = "") -> list[str]:
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    script = tmp_path / "main.py"
    source = MAIN.format(between=between, after=after)
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    return [f"{f.status} {f.message}" for f in result.findings if f.code == "AM020"]


def test_a_sampled_evaluation_between_epochs_is_reported(tmp_path: Path) -> None:
    findings = _am020(tmp_path, "    print(sampled_error(model, test_loader))")
    assert len(findings) == 1, findings
    assert findings[0].startswith(
        "needs-review random draw in `sampled_error` in evaluate.py (`torch.randn`), "
        "which runs here between training epochs over `test_loader`"
    )
    assert "next epoch's order" in findings[0]


@pytest.mark.parametrize(
    "between, after",
    [
        # no draw in the evaluation
        ("    print(plain_error(model, test_loader))", ""),
        # after training: no epoch of the loader follows
        ("", "print(sampled_error(model, test_loader))"),
        # handed no loader
        ("    print(sampled_error(model, [(x, y)]))", ""),
    ],
)
def test_no_report_without_a_draw_a_later_epoch_or_a_loader(
    tmp_path: Path, between: str, after: str
) -> None:
    assert _am020(tmp_path, between or "    pass", after) == []


@pytest.mark.parametrize(
    "call, draw",
    [
        ("noisy_error(model, test_loader, True)", "`torch.randn_like`"),
        ("noisy_error(model, test_loader, augment=True)", "`torch.randn_like`"),
        ("noisy_error(model, test_loader, jitter=0.1)", "`.normal_()`"),
        ("noisy_error(model, test_loader, **opts)", "`torch.randn_like`"),
    ],
)
def test_a_guarded_draw_the_call_turns_on_is_reported(
    tmp_path: Path, call: str, draw: str
) -> None:
    findings = _am020(tmp_path, f"    opts = {{}}\n    print({call})")
    assert len(findings) == 1, findings
    assert f"`noisy_error` in evaluate.py ({draw})" in findings[0]


@pytest.mark.parametrize(
    "call",
    [
        # `if augment:` / `if jitter:` with falsy defaults the call does not pass
        "noisy_error(model, test_loader)",
        # random's and numpy's draws leave torch's random state, from which the
        # loader shuffles, alone
        "numpy_error(model, test_loader)",
    ],
)
def test_no_report_for_a_draw_that_cannot_move_torchs_state(
    tmp_path: Path, call: str
) -> None:
    assert _am020(tmp_path, f"    print({call})") == []
