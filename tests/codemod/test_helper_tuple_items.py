"""A loss unpacked from the tuple a function of another local module returns
(``loss, loss_components = compute_loss(outputs, targets, model)``,
PyTorch-YOLOv3's utils/loss.py): its reduction is read there, at that position,
and is unknown (reported by AM007) where the project view cannot read it."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

LOSSES = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def compute_loss(predictions, targets, model):
    lbox = torch.zeros(1)
    lobj = torch.zeros(1)
    for layer_predictions in predictions:
        b, a, gj, gi = targets
        ps = layer_predictions[b, a, gj, gi]
        lbox += (1.0 - ps[:, 0].sigmoid()).mean()
        lobj += F.binary_cross_entropy_with_logits(layer_predictions[..., 4], torch.zeros_like(layer_predictions[..., 4]))
    loss = lbox + lobj
    return loss, torch.cat((lbox, lobj, loss)).detach()


def mean_loss(out, y):
    loss = F.cross_entropy(out, y)
    acc = (out.argmax(1) == y).float().mean()
    return loss, acc


def sum_loss(out, y):
    return F.mse_loss(out, y, reduction="sum"), out.shape[0]
"""

TRAIN = """
import torch
from losses import {name}

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    loss, extra = {name}(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _migrate(tmp_path: Path, name: str) -> tuple[str, list]:
    (tmp_path / "losses.py").write_text(LOSSES)
    train = tmp_path / "train.py"
    train.write_text(TRAIN.format(name=name))
    result = migrate_source(train.read_bytes(), str(train))
    am007 = [f for f in result.findings if f.code == "AM007"]
    return result.output.decode(), am007  # type: ignore[union-attr]


def test_the_view_reads_the_loss_at_its_position_of_the_tuple(tmp_path: Path) -> None:
    (tmp_path / "losses.py").write_text(LOSSES)
    probe = tmp_path / "probe.py"
    probe.write_text("import losses\n")
    table = dict(read_project(str(probe)).helpers)
    mean = table["losses.mean_loss"].tuple_loss
    assert mean is not None and (mean.position, mean.length, mean.reduction) == (
        0,
        2,
        "mean",
    )
    summed = table["losses.sum_loss"].tuple_loss
    assert summed is not None and summed.reduction == "sum"
    # terms started as zeros and grown with `+=`: no loss the view can read
    assert table["losses.compute_loss"].tuple_loss is None


def test_an_unreadable_item_is_reported_not_weighed_as_a_mean(tmp_path: Path) -> None:
    out, am007 = _migrate(tmp_path, "compute_loss")
    assert "accel.backward(loss)" in out
    assert len(am007) == 1 and am007[0].status == "needs-review"
    assert "item 0 of the 2 values `compute_loss` in losses.py" in am007[0].message


def test_a_readable_mean_item_is_a_mean(tmp_path: Path) -> None:
    out, am007 = _migrate(tmp_path, "mean_loss")
    assert "accel.backward(loss)" in out
    assert [f.status for f in am007] == ["fixed"]


def test_a_readable_sum_item_is_a_sum(tmp_path: Path) -> None:
    out, am007 = _migrate(tmp_path, "sum_loss")
    assert 'accel.backward(loss, reduction="sum")' in out
    assert [f.status for f in am007] == ["fixed"]
