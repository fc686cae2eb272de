"""An optimizer factory that starts from ``optimizer = None`` and builds one
optimizer per branch of its configuration (microsoft/human-pose-estimation.pytorch's
lib/utils/utils.py ``get_optimizer(cfg, model)``): before, its return was of
no known kind, so a caller's model was never shown trained and the batch was
left whole (AM004). A loader that may be None is not taken for a loader."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

UTILS = """
import torch.optim as optim
from torch.utils.data import DataLoader


def get_optimizer(cfg, model):
    optimizer = None
    if cfg["OPTIMIZER"] == "sgd":
        optimizer = optim.SGD(model.parameters(), lr=cfg["LR"], momentum=0.9)
    elif cfg["OPTIMIZER"] == "adam":
        optimizer = optim.Adam(model.parameters(), lr=cfg["LR"])
    return optimizer


def get_val_loader(dataset, cfg):
    loader = None
    if cfg["VAL"]:
        loader = DataLoader(dataset, batch_size=4)
    return loader
"""

SCRIPT = """import torch
from torch.utils.data import DataLoader
from utils import get_optimizer

cfg = {"OPTIMIZER": "adam", "LR": 0.01}
model = torch.nn.Linear(4, 2)
optimizer = get_optimizer(cfg, model)
loader = DataLoader(data, batch_size=8, shuffle=True)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


def test_the_factory_returns_an_optimizer_over_its_model(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "probe.py").write_text("import utils\n")
    table = dict(read_project(str(tmp_path / "probe.py")).helpers)
    assert table["utils.get_optimizer"].returns == "optimizer"
    assert table["utils.get_optimizer"].optimizer_over == ("model", 1, "model")
    # a loader only some configurations build: its callers test it for None
    assert table["utils.get_val_loader"].returns == ""


def test_the_model_and_its_factory_optimizer_are_prepared(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    train = tmp_path / "train.py"
    train.write_text(SCRIPT)
    result = migrate_source(train.read_bytes(), str(train))
    out = result.output.decode()  # type: ignore[union-attr]
    assert "model = accel.prepare_model(torch.nn.Linear(4, 2))" in out
    assert "optimizer = accel.prepare_optimizer(get_optimizer(cfg, model))" in out
    assert not [f for f in result.findings if f.status == "needs-review"]
