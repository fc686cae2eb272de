"""A library's name that a local module re-exports (``project_reexports``):
DeepAR's ``from dataloader import *`` hands main.py torch's DataLoader."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

DATALOADER = """
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler


class WeightedSampler(Sampler):
    def __init__(self, weights):
        self.weights = weights

    def __iter__(self):
        return iter(torch.multinomial(self.weights, len(self.weights), True).tolist())

    def __len__(self):
        return len(self.weights)
"""

LOSSES = """
import torch


def loss_fn(mu, labels):
    zero_index = labels != 0
    return -torch.mean(mu[zero_index] - labels[zero_index])
"""

TRAIN = """
import torch
{imports}

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = {loader}(ds, batch_size=8)
for x, y in loader:
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""


def _train(tmp_path: Path, imports: str, loader: str, helper: str = DATALOADER) -> Path:
    (tmp_path / "dataloader.py").write_text(helper)
    train = tmp_path / "train.py"
    train.write_text(TRAIN.format(imports=imports, loader=loader))
    return train


@pytest.mark.parametrize(
    ("imports", "loader"),
    [
        ("from dataloader import *", "DataLoader"),
        ("from dataloader import DataLoader", "DataLoader"),
        ("from dataloader import DataLoader as DL", "DL"),
        ("import dataloader", "dataloader.DataLoader"),
    ],
)
def test_reexported_loader_is_prepared(
    tmp_path: Path, imports: str, loader: str
) -> None:
    train = _train(tmp_path, imports, loader)
    out = migrate_source(train.read_bytes(), str(train)).output.decode()  # type: ignore[union-attr]
    assert f"loader = accel.prepare_dataloader({loader}(ds, batch_size=8))" in out


@pytest.mark.parametrize(
    "helper",
    [
        DATALOADER + "\n\nclass DataLoader:\n    pass\n",  # redefined
        DATALOADER + "\nDataLoader = list\n",  # rebound
        "try:\n    from torch.utils.data import DataLoader\nexcept ImportError:\n"
        "    DataLoader = None\n",  # conditional
        "from torch.utils.data import *\n",  # not read
    ],
)
def test_rebound_name_is_not_the_library_s(tmp_path: Path, helper: str) -> None:
    train = _train(tmp_path, "from dataloader import DataLoader", "DataLoader", helper)
    out = migrate_source(train.read_bytes(), str(train)).output
    assert b"prepare_dataloader" not in out


def test_facts_record_reexports_and_star_conflicts(tmp_path: Path) -> None:
    train = _train(
        tmp_path, "from dataloader import *\nfrom other import *", "DataLoader"
    )
    (tmp_path / "other.py").write_text("class DataLoader:\n    pass\n\nimport torch\n")
    facts = dict(read_project(str(train)).reexports)
    # two star imports bind DataLoader to different objects: not known
    assert "<star>.DataLoader" not in facts
    assert facts["<star>.Sampler"] == "torch.utils.data.Sampler"
    assert facts["<star>.torch"] == "torch"
    out = migrate_source(train.read_bytes(), str(train)).output
    assert b"prepare_dataloader" not in out


def test_handed_helper_loss_and_drawing_sampler_are_reported(tmp_path: Path) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    train = _train(
        tmp_path,
        "import losses\nfrom dataloader import *\n"
        "def step(model, x, y, loss_fn):\n"
        "    loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n",
        "DataLoader",
    )
    text = train.read_text().replace(
        "loader = DataLoader(ds, batch_size=8)",
        "loader = DataLoader(ds, batch_size=8, sampler=WeightedSampler(w))",
    )
    text = text.replace(
        "    model(x).sum().backward()\n", "    step(model, x, y, losses.loss_fn)\n"
    )
    train.write_text(text)
    result = migrate_source(train.read_bytes(), str(train))
    found = {(f.code, f.status): f.message for f in result.findings}
    assert "may be `losses.loss_fn` (`loss_fn` in losses.py)" in (
        found[("AM007", "needs-review")]
    )
    assert "`WeightedSampler.__iter__` in dataloader.py (`torch.multinomial`)" in (
        found[("AM020", "needs-review")]
    )
