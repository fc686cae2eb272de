"""``project_callers``: a model the caller builds by a call the project view
cannot read (a registry) is known to be a model where the caller hands an
optimizer its parameters, also where that optimizer is a local subclass of a
torch optimizer (``class MySGD(torch.optim.SGD)``), not only a torch class
(r32d, issue 12). The callee's parameter is then a model prepared by the
caller (AM004's info, and every fact that reads prepared models)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

OPTIM = """\
import torch


class MySGD(torch.optim.SGD):
    pass
"""

ENGINE = """\
def train(model, optimizer, loader):
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader

from engine import train
from optim_local import MySGD

REGISTRY = {{"linear": torch.nn.Linear}}
model = REGISTRY["linear"](4, 1)
opt = {optimizer}(model.parameters(), lr=0.1)
loader = DataLoader(list(zip(torch.randn(8, 4), torch.randn(8, 1))), batch_size=4)
train(model, opt, loader)
"""


@pytest.mark.parametrize("optimizer", ["MySGD", "torch.optim.SGD"])
def test_a_model_handed_with_its_optimizer_is_a_model(
    tmp_path: Path, optimizer: str
) -> None:
    (tmp_path / "optim_local.py").write_text(OPTIM)
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "main.py").write_text(MAIN.format(optimizer=optimizer))
    engine = tmp_path / "engine.py"
    view = ProjectView([str(tmp_path / n) for n in ("main.py", "engine.py")])
    facts = view.facts_for(str(engine))
    result = migrate_source(
        engine.read_bytes(), str(engine), MigrateOptions(project=facts)
    )
    infos = [f.message for f in result.findings if f.code == "AM004"]
    assert any(
        "`model` is a parameter that every call from the batch's other files "
        "hands a model built there" in m
        for m in infos
    ), infos
