"""AM020 for random transforms a project's own classes hold or are handed
(``project_draws.held_draws``): torchvision's classification presets building
``T.Compose([T.RandomResizedCrop(...), ...])`` from a local list, ssd.pytorch's
``SSDAugmentation`` holding ``Compose([RandomMirror(), ...])`` applied in a
loop, and a transform handed to a project Dataset whose loader a helper of
another module builds. Each draws in the loader for each process's share."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

PRESETS = """
import torchvision.transforms as T


class ClassificationPresetTrain:
    def __init__(self, crop_size, hflip_prob=0.5):
        trans = [T.RandomResizedCrop(crop_size)]
        if hflip_prob > 0:
            trans.append(T.RandomHorizontalFlip(hflip_prob))
        self.transforms = T.Compose(trans)

    def __call__(self, img):
        return self.transforms(img)


class ClassificationPresetEval:
    def __init__(self, crop_size):
        self.transforms = T.Compose([T.CenterCrop(crop_size)])

    def __call__(self, img):
        return self.transforms(img)
"""

AUGMENTATIONS = """
import numpy as np


class Compose(object):
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class SubtractMeans(object):
    def __init__(self, mean):
        self.mean = mean

    def __call__(self, image):
        return image - self.mean


class RandomMirror(object):
    def __call__(self, image):
        if np.random.randint(2):
            image = image.flip(-1)
        return image


class SSDAugmentation(object):
    def __init__(self, mean=0.1):
        self.augment = Compose([RandomMirror(), SubtractMeans(mean)])

    def __call__(self, img):
        return self.augment(img)


class MeanOnly(object):
    def __init__(self, mean=0.1):
        self.augment = Compose([SubtractMeans(mean)])

    def __call__(self, img):
        return self.augment(img)


class InLoop(object):
    def __init__(self):
        self.steps = [SubtractMeans(0.1), RandomMirror()]

    def __call__(self, img):
        for step in self.steps:
            img = step(img)
        return img
"""

DATA = """
import torch
from torch.utils.data import DataLoader, Dataset


class Shapes(Dataset):
    def __init__(self, n, transform=None):
        self.x = torch.randn(n, 3, 8, 8)
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        img = self.x[i]
        if self.transform is not None:
            img = self.transform(img)
        return img


def make_loader(ds, batch_size=4):
    return DataLoader(ds, batch_size=batch_size, shuffle=True)
"""

HEAD = """
import torch
from torch.utils.data import DataLoader
from data import Shapes, make_loader
from presets import ClassificationPresetTrain, ClassificationPresetEval
from augmentations import SSDAugmentation, MeanOnly, InLoop, RandomMirror

model = torch.nn.Linear(192, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""

STEP = """
for xb in loader:
    loss = model(xb.flatten(1)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _write(tmp_path: Path) -> None:
    (tmp_path / "presets.py").write_text(PRESETS)
    (tmp_path / "augmentations.py").write_text(AUGMENTATIONS)
    (tmp_path / "data.py").write_text(DATA)


def _findings(tmp_path: Path, body: str) -> list[str]:
    _write(tmp_path)
    script = tmp_path / "train.py"
    source = HEAD + body + STEP
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    return [
        f"{f.line}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
        if f.code == "AM020"
    ]


def test_facts_see_draws_of_held_transforms(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "train.py").write_text(HEAD)
    facts = dict(read_project(str(tmp_path / "train.py")).helpers)
    preset = dict(facts["presets.ClassificationPresetTrain"].draws)
    assert "`torchvision.transforms.RandomResizedCrop`" in preset["__call__"]
    assert "`self.transforms`" in preset["__call__"]
    # a deterministic preset holds no draw
    assert facts["presets.ClassificationPresetEval"].draws == ()
    ssd = dict(facts["augmentations.SSDAugmentation"].draws)
    assert "`numpy.random.randint` (in `RandomMirror`" in ssd["__call__"]
    assert facts["augmentations.MeanOnly"].draws == ()
    # `for step in self.steps: img = step(img)` over a held list
    looped = dict(facts["augmentations.InLoop"].draws)
    assert "`numpy.random.randint`" in looped["__call__"]


def test_a_preset_handed_to_a_dataset_is_reported(tmp_path: Path) -> None:
    found = _findings(
        tmp_path,
        "loader = DataLoader(Shapes(16, transform=ClassificationPresetTrain(8)),"
        " batch_size=4)\n",
    )
    assert len(found) == 1, found
    assert "`ClassificationPresetTrain.__call__` in presets.py" in found[0]
    assert "RandomResizedCrop" in found[0]
    assert "[needs-review]" in found[0]


def test_a_held_compose_of_a_random_mirror_is_reported(tmp_path: Path) -> None:
    found = _findings(
        tmp_path,
        "dataset = Shapes(16, transform=SSDAugmentation())\n"
        "loader = DataLoader(dataset, batch_size=4, shuffle=True)\n",
    )
    assert len(found) == 1, found
    assert "`SSDAugmentation.__call__` in augmentations.py" in found[0]
    assert "`numpy.random.randint` (in `RandomMirror`" in found[0]


def test_deterministic_transforms_are_not_reported(tmp_path: Path) -> None:
    found = _findings(
        tmp_path,
        "loader = DataLoader(Shapes(16, transform=MeanOnly()), batch_size=4)\n"
        "val = DataLoader(Shapes(8, transform=ClassificationPresetEval(8)))\n",
    )
    assert found == []


def test_a_loader_a_helper_builds_applies_the_transform(tmp_path: Path) -> None:
    found = _findings(
        tmp_path, "loader = make_loader(Shapes(16, transform=RandomMirror()))\n"
    )
    assert len(found) == 1, found
    assert "`RandomMirror.__call__` in augmentations.py" in found[0]
