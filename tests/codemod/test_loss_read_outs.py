"""A loss rebound to a read-out of itself after its backward (powerful-gnns'
``loss = loss.detach().cpu().numpy()``; ``loss = loss.item()``; ``loss =
float(loss)``) is the same loss, not another reduction: AM007 rewrites the
backward as for the mean it is (it reported "`loss` is assigned losses of
different reductions" before round t8c). ``read_out`` accepts only such
read-outs of the variable itself, not a rebinding that changes the value
(``loss = loss * 2``)."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.analysis import ModuleIndex
from accel_migrate.codemod.reduction.read_outs import read_out

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
loss_accum = 0
for x, y in loader:
    loss = criterion(model(x), y)
    if opt is not None:
        opt.zero_grad()
        loss.backward()
        opt.step()
    loss = READ
    loss_accum += loss
"""


def _am007(read: str) -> list[tuple[str, str]]:
    result = migrate_source(SCRIPT.replace("READ", read), "train.py")
    return [(f.status, f.message) for f in result.findings if f.code == "AM007"]


@pytest.mark.parametrize(
    "read",
    ["loss.detach().cpu().numpy()", "loss.item()", "float(loss)", "loss.data.cpu()"],
)
def test_a_read_out_of_the_loss_is_the_same_loss(read: str) -> None:
    assert _am007(read) == [("fixed", "x.backward() -> accel.backward(x)")]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("loss.detach().cpu().numpy()", True),
        ("float(loss)", True),
        ("loss.data", True),
        ("loss.detach() * 2", False),
        ("loss.mean()", False),
        ("other.item()", False),
        ("loss", False),
    ],
)
def test_read_out_accepts_only_read_outs_of_the_variable(
    value: str, expected: bool
) -> None:
    source = f"loss = f()\nother = g()\nloss = {value}\n"
    module = cst.parse_module(source)
    index = ModuleIndex(MetadataWrapper(module), "accel")
    statement = index.module.body[2].body[0]
    assert isinstance(statement, cst.Assign)
    key = index.key(statement.targets[0].target)
    assert key is not None
    assert read_out(index, statement.value, key) is expected
