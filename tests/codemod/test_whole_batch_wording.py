"""Findings that speak of each process's share of the batch say something else
where no data loader is sharded (issue 12, r28b): pyGAT trains on the whole
graph every step and SASRec draws its batches from its own sampler, so every
process runs the whole batch. AM027 (a model of a local module with dropout)
then says that each process draws masks for the whole batch."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

MODELS = """\
import torch.nn.functional as F
from torch import nn


class GAT(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 2)

    def forward(self, x):
        return self.fc(F.dropout(x, 0.5, training=self.training))
"""

FULL_GRAPH = """\
import torch
import torch.nn.functional as F

from models import GAT

features = torch.randn(10, 4)
labels = torch.arange(10) % 2
idx_train = torch.arange(6)
model = GAT(4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(3):
    optimizer.zero_grad()
    output = model(features)
    loss = F.cross_entropy(output[idx_train], labels[idx_train])
    loss.backward()
    optimizer.step()
"""

LOADER = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from models import GAT

loader = DataLoader(TensorDataset(torch.randn(10, 4), torch.arange(10) % 2), batch_size=4)
model = GAT(4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for x, y in loader:
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


def _am027(tmp_path: Path, script: str) -> str:
    (tmp_path / "models.py").write_text(MODELS)
    train = tmp_path / "train.py"
    train.write_text(script)
    view = ProjectView([str(train)])
    result = migrate_source(
        script, str(train), MigrateOptions(project=view.facts_for(str(train)))
    )
    (found,) = [f.message for f in result.findings if f.code == "AM027"]
    return found


def test_dropout_over_a_whole_graph_speaks_of_the_whole_batch(tmp_path: Path) -> None:
    message = _am027(tmp_path, FULL_GRAPH)
    assert "share" not in message
    assert "no data loader is sharded here, so every process runs the whole batch" in (
        message
    )


def test_dropout_over_a_sharded_loader_speaks_of_shares(tmp_path: Path) -> None:
    message = _am027(tmp_path, LOADER)
    assert "each process draws its own dropout masks for its share of the batch" in (
        message
    )
