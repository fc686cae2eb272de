"""A loss returned by a local module's function, read across files (round 10 of
the soundness red team): a sum-reduced loss plus a summed penalty over a model
output (the VAE example's ``loss_function`` in its own module) is a sum over the
batch; a penalty over something else, or a return the view cannot read, makes
the reduction unknown (AM007 needs-review), never a silent mean."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, MigrationResult, migrate_source
from accel_migrate.codemod.project_view import ProjectView

LOSSES = """\
import torch
import torch.nn.functional as F


def loss_function(recon_x, x, code, beta=0.01):
    rec = F.mse_loss(recon_x, x, reduction="sum")
    sparsity = torch.sum(torch.abs(code))
    return rec + beta * sparsity


def opaque_loss(recon_x, x, code):
    return F.mse_loss(recon_x, x, reduction="sum") + code.norm()
"""

MODEL = """\
import torch.nn as nn


class AE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 2)
        self.dec = nn.Linear(2, 6)

    def forward(self, x):
        code = self.enc(x)
        return self.dec(code), code
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from losses import loss_function, opaque_loss
from model import AE

loader = DataLoader(TensorDataset(torch.randn(16, 6)), batch_size=4)
test_loader = DataLoader(TensorDataset(torch.randn(8, 6)), batch_size=4)
model = AE()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for (data,) in loader:
    optimizer.zero_grad()
    recon, code = model(data)
    loss = {loss}
    loss.backward()
    optimizer.step()
test_loss = 0
with torch.no_grad():
    for (data,) in test_loader:
        recon, code = model(data)
        test_loss += loss_function(recon, data, code).item()
print(test_loss / len(test_loader.dataset))
"""


def _migrate(tmp_path: Path, loss: str) -> MigrationResult:
    (tmp_path / "losses.py").write_text(LOSSES)
    (tmp_path / "model.py").write_text(MODEL)
    main = tmp_path / "main.py"
    main.write_text(MAIN.format(loss=loss))
    view = ProjectView([str(p) for p in sorted(tmp_path.glob("*.py"))])
    return migrate_source(
        main.read_bytes(), str(main), MigrateOptions(project=view.facts_for(str(main)))
    )


def _am007(result: MigrationResult) -> list[tuple[str, str]]:
    return [(f.status, f.message) for f in result.findings if f.code == "AM007"]


def test_a_summed_penalty_over_a_model_output_is_a_sum_over_the_batch(
    tmp_path: Path,
) -> None:
    result = _migrate(tmp_path, "loss_function(recon, data, code)")
    output = result.output if isinstance(result.output, str) else result.output.decode()
    assert 'accel.backward(loss, reduction="sum")' in output
    assert "test_loss = accel.reduce(test_loss)" in output
    assert [s for s, _ in _am007(result)] == ["fixed"]


@pytest.mark.parametrize(
    ("loss", "why"),
    [
        # a penalty over the model's weights is no sum over the batch
        ("loss_function(recon, data, model.enc.weight)", "parameter `code`"),
        ("loss_function(recon, data, next(model.parameters()))", "parameter `code`"),
        # a scale that may differ between the processes
        ("loss_function(recon, data, code, beta=1 / len(data))", "parameter `beta`"),
        # a return the view cannot read: no mean is assumed
        ("opaque_loss(recon, data, code)", "`opaque_loss` in losses.py"),
    ],
)
def test_a_loss_the_view_cannot_prove_a_sum_is_reported(
    tmp_path: Path, loss: str, why: str
) -> None:
    found = _am007(_migrate(tmp_path, loss))
    assert [s for s, _ in found] == ["needs-review"], found
    assert why in found[0][1]
