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


LOSSES = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class SupConLoss(nn.Module):
    def __init__(self, temperature=0.07):
        super().__init__()
        self.temperature = temperature

    def forward(self, features, labels):
        labels = labels.contiguous().view(-1, 1)
        mask = torch.eq(labels, labels.T).float()
        logits = torch.div(torch.matmul(features, features.T), self.temperature)
        log_prob = logits - torch.log(torch.exp(logits).sum(1, keepdim=True))
        return -((mask * log_prob).sum(1) / mask.sum(1)).mean()
"""

HANDED = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
import accel_migrate.runtime as accel
from losses import SupConLoss


def set_model():
    model = accel.prepare_model(nn.Linear(4, 2))
    criterion = SupConLoss(temperature=0.5)
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
{build}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train(loader, model, criterion, optimizer)
"""


def _migrate_handed(tmp_path, build: str):  # type: ignore[no-untyped-def]
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "main.py"
    script.write_text(HANDED.format(build=build))
    return migrate_source(script.read_text(), str(script))


def test_a_model_unpacked_from_a_factory_that_prepares_it_is_prepared(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """The advice of the finding above, followed (``set_model`` prepares the
    model it returns in a tuple): the file migrates, and the criterion unpacked
    with it, handed to ``train``, is read: SupConLoss compares samples."""
    result = _migrate_handed(tmp_path, "    model, criterion = set_model()")
    assert "accel.backward(loss)" in result.output
    assert "accel.prepare_dataloader(" in result.output
    (finding,) = [f for f in result.findings if f.code == "AM007"]
    assert finding.status == "needs-review"
    assert "`SupConLoss` in losses.py" in finding.message


def test_a_pairwise_criterion_handed_in_as_a_parameter_is_named(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    result = _migrate_handed(
        tmp_path,
        "    model = nn.Linear(4, 2)\n    criterion = SupConLoss(temperature=0.5)",
    )
    (finding,) = [f for f in result.findings if f.code == "AM007"]
    assert finding.status == "needs-review"
    assert "compares the samples of the batch with each other" in finding.message
    assert "`SupConLoss` in losses.py" in finding.message
