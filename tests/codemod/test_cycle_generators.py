"""A project's own endless generator around a loader (round t12b: lucidrains'
electra-pytorch pretrain.py, ``iter(cycle(DataLoader(...)))`` read with
``next()`` per step; the same ``cycle`` in denoising-diffusion trainers).
The index sees through a generator that yields each item of its first
parameter, so a batch taken from it is this process's share: a printed
accuracy of that batch is reported (it was migrated with no finding)."""

from __future__ import annotations

import libcst as cst
import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.index_loaders import repeats_first

SCRIPT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        out = self.fc(x)
        with torch.no_grad():
            acc = (out.argmax(1) == y).float().mean()
        return F.cross_entropy(out, y), acc


def cycle(iterable):
{body}


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,))), batch_size=4)
it = iter(cycle(loader))
for step in range(6):
    x, y = next(it)
    loss, acc = model(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("step %d loss %.4f acc %.4f" % (step, loss.item(), acc.item()))
"""

ENDLESS = "    while True:\n        for x in iterable:\n            yield x"


@pytest.mark.parametrize(
    "body",
    [
        ENDLESS,
        "    while True:\n        yield from iterable",
        "    for b in iterable:\n        yield b",
    ],
)
def test_printed_accuracy_of_a_cycled_loader_is_reported(body: str) -> None:
    result = migrate_source(SCRIPT.format(body=body))
    acc = [f for f in result.findings if f.code == "AM008" and "`acc`" in f.message]
    assert len(acc) == 1 and acc[0].status == "needs-review", result.findings
    assert "accel.global_loss(loss).item()" in str(result.output)


@pytest.mark.parametrize(
    "body, repeats",
    [
        (ENDLESS, True),
        ('    """Endless."""\n' + ENDLESS, True),
        ("    for x in iterable:\n        yield x * 2", False),  # not the items
        ("    for x in other:\n        yield x", False),  # not its parameter
        (
            "    while True:\n        for x in iterable:\n            yield x\n    print(1)",
            False,
        ),
        ("    return iter(iterable)", False),
    ],
)
def test_repeats_first(body: str, repeats: bool) -> None:
    function = cst.parse_module(f"def cycle(iterable):\n{body}\n").body[0]
    assert isinstance(function, cst.FunctionDef)
    assert repeats_first(function) is repeats
