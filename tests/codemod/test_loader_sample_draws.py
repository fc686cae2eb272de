"""AM020 at the call of a helper that builds a loader over a dataset class of
the project drawing for each sample (``loader_sample_draws``):
kamalesh0406/Audio-Classification's ``fetch_dataloader`` over ``AudioDataset``,
whose ``__getitem__`` masks random mel bands (SpecAugment)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

DATASETS = """\
import random

import torch
from torch.utils.data import DataLoader, Dataset


def freq_mask(spec, F=2):
    cloned = spec.clone()
    f_zero = random.randrange(0, cloned.shape[0] - F)
    cloned[f_zero : f_zero + F] = 0
    return cloned


class AudioDataset(Dataset):
    def __init__(self, n):
        self.data = torch.randn(n, 6, 5)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return freq_mask(self.data[idx]), idx % 2


class Plain(Dataset):
    def __init__(self, n):
        self.data = torch.randn(n, 6, 5)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.data[idx], idx % 2


def fetch_dataloader(n, batch_size):
    dataset = AudioDataset(n)
    return DataLoader(dataset, shuffle=True, batch_size=batch_size)


def fetch_plain(n, batch_size):
    return DataLoader(Plain(n), batch_size=batch_size)
"""

SCRIPT = """\
import torch
import torch.nn.functional as F

import datasets

train_loader = datasets.{factory}(16, 4)
model = torch.nn.Linear(30, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in train_loader:
    loss = F.cross_entropy(model(x.flatten(1)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _run(tmp_path: Path, factory: str) -> list:
    (tmp_path / "datasets.py").write_text(DATASETS)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT.format(factory=factory))
    return list(migrate_source(script.read_bytes(), str(script)).findings)


def test_the_fact_names_the_dataset_draw(tmp_path: Path) -> None:
    (tmp_path / "datasets.py").write_text(DATASETS)
    (tmp_path / "main.py").write_text(SCRIPT.format(factory="fetch_dataloader"))
    facts = dict(read_project(str(tmp_path / "main.py")).helpers)
    assert facts["datasets.fetch_dataloader"].sample_draws == (
        "`random.randrange` in `AudioDataset.__getitem__`"
    )
    assert facts["datasets.fetch_plain"].sample_draws == ""
    # not a loader factory: no sample draws asked of it
    assert facts["datasets.freq_mask"].sample_draws == ""


def test_the_call_of_the_loader_factory_is_reported(tmp_path: Path) -> None:
    """Before: no finding, and the migrated run's losses differed (each process
    drew the masks of its own share)."""
    (finding,) = [f for f in _run(tmp_path, "fetch_dataloader") if f.code == "AM020"]
    assert finding.status == "needs-review" and finding.line == 6
    assert finding.message.startswith(
        "random draw in `fetch_dataloader` in datasets.py (`random.randrange` in "
        "`AudioDataset.__getitem__`), which the data loader built here runs for "
        "each process's own share of the samples"
    )


def test_a_loader_over_a_dataset_that_draws_nothing_is_not(tmp_path: Path) -> None:
    assert not [f for f in _run(tmp_path, "fetch_plain") if f.code == "AM020"]
