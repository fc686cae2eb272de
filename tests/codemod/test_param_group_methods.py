"""An optimizer over the parameter groups a model's own method hands back
(``param_group_methods``): yjxiong/tsn-pytorch's
``SGD(model.get_optim_policies(), ...)``. Before, AM004 found no optimizer
over the model's parameters and left the whole file unchanged."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

MODELS = """
import torch
from torch import nn


class TSN(nn.Module):
    def __init__(self):
        super().__init__()
        self.base_model = nn.Conv2d(3, 4, 3)
        self.new_fc = nn.Linear(4, 2)
        self.other = nn.Linear(2, 2)

    def forward(self, x):
        return self.new_fc(self.base_model(x).mean((2, 3)))

    def get_optim_policies(self):
        conv, normal = [], []
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                conv.extend(list(m.parameters()))
            elif isinstance(m, nn.Linear):
                normal.append(m.weight)
        return [{"params": conv, "lr_mult": 1}, {"params": normal, "lr_mult": 2}]

    def fc_groups(self):
        return [{"params": self.new_fc.parameters()}]

    def groups_with(self, other):
        return [{"params": other.parameters()}]


GLOBAL = nn.Linear(2, 2)


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)

    def foreign(self):
        return [{"params": GLOBAL.parameters()}]
"""

SCRIPT = """import torch
from torch.utils.data import DataLoader

from models import TSN

model = TSN()
policies = model.get_optim_policies()
model = torch.nn.DataParallel(model)
optimizer = torch.optim.SGD(policies, 0.1, momentum=0.9)
loader = DataLoader(data, batch_size=8, shuffle=True)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


def test_the_methods_that_hand_back_own_parameter_groups(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "probe.py").write_text("import models\n")
    table = dict(read_project(str(tmp_path / "probe.py")).helpers)
    # a parameter of the method, or a global's parameters: not its own
    assert table["models.TSN"].param_group_methods == (
        "get_optim_policies",
        "fc_groups",
    )
    assert table["models.Wrapper"].param_group_methods == ()


def test_the_model_of_the_groups_is_prepared(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    train = tmp_path / "train.py"
    train.write_text(SCRIPT)
    result = migrate_source(train.read_bytes(), str(train))
    out = result.output.decode()  # type: ignore[union-attr]
    assert "model = accel.prepare_model(TSN())" in out
    assert "torch.nn.DataParallel" not in out
    assert (
        "optimizer = accel.prepare_optimizer(torch.optim.SGD(policies, 0.1, "
        "momentum=0.9))" in out
    )
    assert not [f for f in result.findings if f.status == "needs-review"]


def test_groups_of_a_method_over_other_parameters_are_not_followed(
    tmp_path: Path,
) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    train = tmp_path / "train.py"
    train.write_text(
        SCRIPT.replace("from models import TSN", "from models import Wrapper as TSN")
        .replace("model.get_optim_policies()", "model.foreign()")
        .replace("model(x)", "model(x.flatten(1)[:, :2])")
        .replace("for x, y in loader:", "model.train()\nfor x, y in loader:")
    )
    result = migrate_source(train.read_bytes(), str(train))
    assert not result.changed
    assert [f.code for f in result.findings if f.status == "needs-review"] == ["AM004"]
