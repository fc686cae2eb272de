"""AM020 for draws a model makes through an object it holds (torchvision's
detection heads sample the anchors that train with ``torch.randperm`` in a
``BalancedPositiveNegativeSampler`` held as ``self.fg_bg_sampler``), and for a
model whose forward draws handed to an imported function that trains it
(torchvision's reference ``engine.train_one_epoch(model, ...)``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

DETECTOR = """
import torch
from torch import nn


class Sampler:
    def __init__(self, batch_size_per_image):
        self.batch_size_per_image = batch_size_per_image

    def __call__(self, matched):
        perm = torch.randperm(matched.numel())[: self.batch_size_per_image]
        return matched[perm]


class Quiet:
    def __call__(self, matched):
        return matched[: 4]


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.sampler = Sampler(4)

    def forward(self, x):
        return self.sampler(x)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.fg_bg_sampler = Sampler(4)

    def forward(self, x):
        out = self.fc(x)
        kept = self.fg_bg_sampler(out.flatten())
        return kept.mean()


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.head = Head()

    def forward(self, x):
        return self.head(self.fc(x).flatten()).mean()


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.sampler = Quiet()

    def forward(self, x):
        return self.sampler(self.fc(x).flatten()).mean()


def detector_tiny():
    return Detector()
"""

# A reference-scripts engine: its logging reduces over the process group when
# there is one (``utils.reduce_dict``), so the file that hands it the model is
# migrated (AM004 leaves a trainer that runs collectives to them).
ENGINE = """
import torch.distributed as dist


def train_one_epoch(model, optimizer, data_loader, epoch):
    model.train()
    for xb, yb in data_loader:
        loss = model(xb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        logged = loss.detach().clone()
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(logged)
        print(logged.item())
"""

HEAD = """
import torch
from torch.utils.data import DataLoader, TensorDataset

import detector
from detector import Detector, Nested, Plain
from engine import train_one_epoch

loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16)), batch_size=4)
"""


def _findings(tmp_path: Path, body: str) -> list[str]:
    (tmp_path / "detector.py").write_text(DETECTOR)
    (tmp_path / "engine.py").write_text(ENGINE)
    script = tmp_path / "train.py"
    source = HEAD + body
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    return [
        f"{f.line}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
        if f.code == "AM020"
    ]


def test_a_held_object_whose_call_draws_is_a_draw_of_its_holder(
    tmp_path: Path,
) -> None:
    (tmp_path / "detector.py").write_text(DETECTOR)
    (tmp_path / "train.py").write_text(HEAD)
    facts = dict(read_project(str(tmp_path / "train.py")).helpers)
    assert facts["detector.Sampler"].draws == (("__call__", "`torch.randperm`"),)
    held = "(in `Sampler`, called as `self.fg_bg_sampler(...)`)"
    assert facts["detector.Detector"].draws == (
        ("forward", f"`torch.randperm` {held}"),
    )
    # an object held by a held object
    nested = dict(facts["detector.Nested"].draws)
    assert "`torch.randperm`" in nested["forward"]
    assert "called as `self.head(...)`" in nested["forward"]
    # a held object whose call draws nothing
    assert facts["detector.Plain"].draws == ()
    assert facts["detector.Quiet"].draws == ()


def test_a_step_running_a_model_whose_held_sampler_draws(tmp_path: Path) -> None:
    body = """
model = Detector()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for xb, yb in loader:
    loss = model(xb)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""
    found = _findings(tmp_path, body)
    assert len(found) == 1, found
    assert "`Detector.forward` in detector.py" in found[0]
    assert "called as `self.fg_bg_sampler(...)`" in found[0]


def test_a_drawing_model_handed_to_an_imported_trainer(tmp_path: Path) -> None:
    body = """
model = detector.detector_tiny()
params = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.SGD(params, lr=0.1)
for epoch in range(2):
    train_one_epoch(model, opt, loader, epoch)
"""
    found = _findings(tmp_path, body)
    assert len(found) == 1, found
    assert found[0].startswith("15: AM020 [needs-review]")
    assert "`Detector.forward` in detector.py" in found[0]
    assert "`model` is handed to a function that trains it" in found[0]


def test_a_quiet_model_handed_to_an_imported_trainer(tmp_path: Path) -> None:
    body = """
model = Plain()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    train_one_epoch(model, opt, loader, epoch)
"""
    assert _findings(tmp_path, body) == []
