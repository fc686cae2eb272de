"""AM037: a reduction over dimension 0 of a value built from one record a
loop of the forward walks is not a reduction over the batch.

torchvision's detection reference matches anchors image by image,
``for t in targets: iou = box_iou(t["boxes"], anchors); best, which =
iou.max(0)``: dimension 0 of ``iou`` is the image's boxes, not the batch's
samples (r32d, issue 12). The same reduction of the forward's input is still
reported, in a model of the file and in one of a local module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

DETECTOR = """\
import torch
from torch import nn


def box_iou(a, b):
    return (a[:, None, :2] - b[None, :, :2]).abs().sum(-1)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 4)
        self.anchors = torch.rand(6, 4)

    def forward(self, images, targets):
        boxes = self.head(images)
        return self.compute_loss(boxes, targets)

    def compute_loss(self, boxes, targets):
        losses = []
        for box, t in zip(boxes, targets):
            iou = box_iou(t["boxes"], self.anchors)
            best, which = {reduced}.max(0)
            losses.append((box - best.mean()).pow(2).mean() * which.float().mean())
        return torch.stack(losses).mean()
"""

STEP = """\
import torch
from torch.utils.data import DataLoader
{model}

def collate(batch):
    return torch.stack([b[0] for b in batch]), [{{"boxes": b[1]}} for b in batch]


data = [(torch.rand(4), torch.rand(2, 4)) for _ in range(8)]
loader = DataLoader(data, batch_size=4, collate_fn=collate)
model = Detector()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for images, targets in loader:
    optimizer.zero_grad()
    loss = model(images, targets)
    loss.backward()
    optimizer.step()
"""


def _am037(tmp_path: Path, reduced: str, helper: bool) -> list[str]:
    detector = DETECTOR.format(reduced=reduced)
    if helper:
        (tmp_path / "detector.py").write_text(detector)
        source = STEP.format(model="from detector import Detector\n")
    else:
        source = STEP.format(model=detector)
    main = tmp_path / "main.py"
    main.write_text(source)
    facts = read_project(str(main))
    result = migrate_source(source, str(main), MigrateOptions(project=facts))
    return [f.message for f in result.findings if f.code == "AM037"]


@pytest.mark.parametrize("helper", [False, True])
def test_a_records_matrix_is_not_the_batch(tmp_path: Path, helper: bool) -> None:
    assert _am037(tmp_path, "iou", helper) == []


@pytest.mark.parametrize("helper", [False, True])
def test_the_forwards_input_still_is(tmp_path: Path, helper: bool) -> None:
    found = _am037(tmp_path, "boxes", helper)
    assert len(found) == 1, found
    assert "reduces over dimension 0" in found[0]
