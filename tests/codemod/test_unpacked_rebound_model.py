"""A model name bound twice in one function: unpacked from a call first, built
again later (HobbitLong/SupContrast run as two stages: ``model, criterion =
set_model(opt)`` trains with SupConLoss, then ``model = SupConResNet(...)``
loads the checkpoint for the linear stage). Round t8a: AM004 wrapped the second
binding and took the name for prepared, so the first stage's loop ran sharded
with an unprepared model (the runtime stopped it: LOUD by accident). The file
is left whole now, naming the unpacking."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def set_model():
    model = nn.Linear(4, 2)
    criterion = nn.CrossEntropyLoss()
    return model, criterion


def train(loader, model, criterion, optimizer):
    model.train()
    for x, y in loader:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(data):
    loader = DataLoader(data, batch_size=8, shuffle=True)
{first}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(loader, model, criterion, optimizer)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(loader, model, criterion, optimizer)
"""


def test_a_model_unpacked_then_rebuilt_leaves_the_file_whole() -> None:
    source = SCRIPT.format(first="    model, criterion = set_model()")
    result = migrate_source(source, "main.py")
    assert result.output == source
    blocked = [f for f in result.findings if f.code == "AM004"]
    assert any(
        f.status == "needs-review" and "`model, criterion = set_model()`" in f.message
        for f in blocked
    ), [f.message for f in blocked]


def test_a_model_built_twice_is_prepared_at_both() -> None:
    source = SCRIPT.format(
        first="    model = nn.Linear(4, 2)\n    criterion = nn.CrossEntropyLoss()"
    )
    result = migrate_source(source, "main.py")
    assert result.output.count("accel.prepare_model(nn.Linear(4, 2))") == 2
    assert "accel.backward(loss)" in result.output
