"""AM020 for a library model that draws in train mode: torchvision's Faster
R-CNN (and Mask/Keypoint R-CNN) sample the anchors and proposals they train on
with ``torch.randperm`` (``BalancedPositiveNegativeSampler``), built in the
script, by a local factory, or held by a local model class."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.random_names import sampling_model

DETECTOR = """
import torch.nn as nn
import torchvision
from torchvision.models.detection import fasterrcnn_resnet50_fpn


def get_model(num_classes):
    return fasterrcnn_resnet50_fpn(weights=None, num_classes=num_classes)


class Wrapped(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.det = torchvision.models.detection.maskrcnn_resnet50_fpn(
            num_classes=num_classes
        )

    def forward(self, images, targets=None):
        return self.det(images, targets)
"""

SCRIPT = """
import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset
from detector import get_model, Wrapped

model = {model}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{loader}
model.train()
for (images,) in loader:
    targets = [{{"boxes": torch.tensor([[0.0, 0.0, 4.0, 4.0]]),
                "labels": torch.tensor([1])}} for _ in images]
    loss_dict = model(list(images), targets)
    loss = sum(loss_dict.values())
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

LOADER = "loader = DataLoader(TensorDataset(torch.randn(8, 3, 32, 32)), batch_size=2)"


def _findings(tmp_path: Path, model: str, loader: str = LOADER) -> list[str]:
    (tmp_path / "detector.py").write_text(DETECTOR)
    script = tmp_path / "train.py"
    source = SCRIPT.format(model=model, loader=loader)
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    return [
        f"{f.line}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
        if f.code == "AM020"
    ]


@pytest.mark.parametrize(
    "name, samples",
    [
        ("torchvision.models.detection.fasterrcnn_resnet50_fpn", True),
        ("torchvision.models.detection.faster_rcnn.FasterRCNN", True),
        ("torchvision.models.detection.maskrcnn_resnet50_fpn_v2", True),
        ("torchvision.models.detection.keypointrcnn_resnet50_fpn", True),
        ("torchvision.models.detection.rpn.RegionProposalNetwork", True),
        ("torchvision.models.detection.roi_heads.RoIHeads", True),
        ("torchvision.models.detection.retinanet_resnet50_fpn", False),
        # layers of those models, which draw nothing: the class names exactly
        ("torchvision.models.detection.mask_rcnn.MaskRCNN", True),
        ("torchvision.models.detection.keypoint_rcnn.KeypointRCNN", True),
        ("torchvision.models.detection.mask_rcnn.MaskRCNNPredictor", False),
        ("torchvision.models.detection.mask_rcnn.MaskRCNNHeads", False),
        ("torchvision.models.detection.keypoint_rcnn.KeypointRCNNHeads", False),
        ("torchvision.models.detection.keypoint_rcnn.KeypointRCNNPredictor", False),
        ("torchvision.models.detection.faster_rcnn.FastRCNNPredictor", False),
        ("torchvision.models.detection.FasterRCNN_ResNet50_FPN_Weights", False),
        ("torchvision.models.resnet18", False),
    ],
)
def test_sampling_models_by_name(name: str, samples: bool) -> None:
    assert sampling_model(name) is samples


def test_a_faster_rcnn_built_in_the_script(tmp_path: Path) -> None:
    found = _findings(
        tmp_path,
        "torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(num_classes=3)",
    )
    assert len(found) == 1, found
    assert found[0].startswith("7: AM020 [needs-review]")
    assert "fasterrcnn_mobilenet_v3_large_fpn` builds a model that draws" in found[0]
    assert "`torch.randperm`" in found[0]


def test_a_local_factory_of_one(tmp_path: Path) -> None:
    found = _findings(tmp_path, "get_model(3)")
    assert len(found) == 1, found
    assert "`get_model` in detector.py (which builds " in found[0]
    assert "fasterrcnn_resnet50_fpn`)" in found[0]


def test_a_local_model_holding_one(tmp_path: Path) -> None:
    found = _findings(tmp_path, "Wrapped(3)")
    assert len(found) == 1, found
    assert "`Wrapped.forward` in detector.py" in found[0]
    assert "maskrcnn_resnet50_fpn`, which samples anchors" in found[0]


def test_not_reported_without_a_sampling_model_or_a_loader(tmp_path: Path) -> None:
    assert (
        _findings(
            tmp_path,
            "torchvision.models.detection.retinanet_resnet50_fpn(num_classes=3)",
        )
        == []
    )
    # nothing sharded: every process runs the whole batch
    assert (
        _findings(
            tmp_path,
            "get_model(3)",
            "loader = [(torch.randn(2, 3, 32, 32),)]",
        )
        == []
    )


def test_a_replaced_predictor_is_no_second_sampling_model(tmp_path: Path) -> None:
    # the fine-tuning tutorial's shape: the heads' layers replaced on a Mask
    # R-CNN; `MaskRCNNPredictor` is a layer, which draws nothing of its own
    model = (
        "torchvision.models.detection.maskrcnn_resnet50_fpn(num_classes=3)\n"
        "from torchvision.models.detection.mask_rcnn import MaskRCNNPredictor\n"
        "model.roi_heads.mask_predictor = MaskRCNNPredictor(256, 256, 3)"
    )
    found = _findings(tmp_path, model)
    assert len(found) == 1, found
    assert found[0].startswith("7: AM020 [needs-review]")
    assert "maskrcnn_resnet50_fpn` builds a model that draws" in found[0]
    assert "MaskRCNNPredictor" not in "\n".join(found)
