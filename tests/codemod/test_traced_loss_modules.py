"""A ``torch.nn`` loss module that sums, handed in as a parameter
(twtygqyy/pytorch-vdsr's main_vdsr.py: ``criterion = nn.MSELoss(size_average=False)``
in ``main()``, ``train(training_data_loader, optimizer, model, criterion, epoch)``
calling ``loss = criterion(model(input), target)``). Round t17a: AM007 took the
call for a mean over samples and wrote ``accel.backward(loss)`` (SILENT:
vdsr_step_lr_clip_t17a_project trained on half the gradient at world 2 once the
gradient clipping stopped hiding it, and logged half the loss)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


def main():
    loader = DataLoader(TensorDataset(torch.randn(8, 2), torch.randn(8, 1)), batch_size=4)
    model = nn.Linear(2, 1)
    criterion = BUILD
    if torch.cuda.is_available():
        criterion = criterion.cuda()
    optimizer = optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        train(loader, optimizer, model, criterion, epoch)


def train(loader, optimizer, model, criterion, epoch):
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())


if __name__ == "__main__":
    main()
"""


def _migrated(build: str) -> tuple[str, list]:
    result = migrate_source(SCRIPT.replace("BUILD", build))
    return str(result.output), [f for f in result.findings if f.code == "AM007"]


@pytest.mark.parametrize(
    "build",
    ['nn.MSELoss(reduction="sum")', "nn.MSELoss(size_average=False)"],
)
def test_handed_sum_module_is_a_sum(build: str) -> None:
    code, findings = _migrated(build)
    assert 'accel.backward(loss, reduction="sum")' in code
    assert "accel.global_loss(loss).item()" in code
    assert [f.status for f in findings] == ["fixed"]


def test_handed_mean_module_stays_a_mean() -> None:
    code, findings = _migrated("nn.MSELoss()")
    assert "accel.backward(loss)\n" in code
    assert [f.status for f in findings] == ["fixed"]


def test_handed_sum_or_mean_chosen_at_run_time_is_unknown() -> None:
    build = 'nn.L1Loss()\n    if len(loader) > 1:\n        criterion = nn.MSELoss(reduction="sum")'
    code, findings = _migrated(build)
    assert 'reduction="sum"' not in code.split("def train", 1)[1]
    assert [f.status for f in findings] == ["needs-review"]
    assert (
        "may be" in findings[0].message and "chosen at run time" in findings[0].message
    )
