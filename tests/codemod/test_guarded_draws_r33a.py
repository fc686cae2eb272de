"""AM020 for draws that only some calls of a local function make
(``draw_guards``), a project transform built by a function of a package's
module (proxy-nca's ``dataset.utils.make_transform``), and a transform class
defined in the migrated file and handed to an imported dataset (ssd.pytorch's
``Compose([RandomMirror(), ...])``). The helpers are read, never run."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.draw_guards import first_draw, guarded_draws


def _am020(folder: Path, name: str = "train.py") -> list[int]:
    path = folder / name
    source = path.read_text()
    result = migrate_source(source, str(path), MigrateOptions())
    return sorted(f.line for f in result.findings if f.code == "AM020")


def _draws_of(source: str) -> tuple:
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)

    def test(call: ast.Call) -> str:
        return "`torch.rand`" if ast.unparse(call.func) == "torch.rand" else ""

    return guarded_draws(function, test)


def _call(code: str) -> cst.Call:
    expr = cst.parse_expression(code)
    assert isinstance(expr, cst.Call)
    return expr


def test_a_draw_under_a_test_of_a_parameter_is_not_every_calls() -> None:
    guarded = _draws_of(
        "def process(data, data_type='train'):\n"
        "    if data_type == 'train':\n"
        "        return torch.rand(3)\n"
        "    elif data_type == 'valid':\n"
        "        return data\n"
    )
    assert first_draw(guarded, _call("process(x, 'train')")) == "`torch.rand`"
    assert first_draw(guarded, _call("process(x)")) == "`torch.rand`"  # default
    assert first_draw(guarded, _call("process(x, 'valid')")) == ""
    assert first_draw(guarded, _call("process(x, data_type='valid')")) == ""
    # not proven: a variable, or `*args`/`**kwargs` that may pass anything
    assert first_draw(guarded, _call("process(x, kind)")) == "`torch.rand`"
    assert first_draw(guarded, _call("process(*args)")) == "`torch.rand`"


def test_truth_tests_and_conditional_expressions() -> None:
    guarded = _draws_of(
        "def make(size, is_train=True):\n"
        "    return torch.rand(size) if is_train else torch.zeros(size)\n"
    )
    assert first_draw(guarded, _call("make(4)")) == "`torch.rand`"
    assert first_draw(guarded, _call("make(4, is_train=False)")) == ""
    assert first_draw(guarded, _call("make(4, False)")) == ""
    assert first_draw(guarded, _call("make(**cfg, is_train=False)")) == ""
    assert first_draw(guarded, _call("make(**cfg)")) == "`torch.rand`"
    negated = _draws_of(
        "def make(size, evaluate=False):\n"
        "    if not evaluate:\n"
        "        return torch.rand(size)\n"
    )
    assert first_draw(negated, _call("make(4, evaluate=True)")) == ""
    assert first_draw(negated, _call("make(4)")) == "`torch.rand`"


def test_a_rebound_parameter_guards_nothing() -> None:
    guarded = _draws_of(
        "def make(size, is_train=True):\n"
        "    is_train = size > 2\n"
        "    if is_train:\n"
        "        return torch.rand(size)\n"
    )
    assert first_draw(guarded, _call("make(4, is_train=False)")) == "`torch.rand`"


SPEECH_UTILS = """
import torch


class FrequencyMasking(torch.nn.Module):
    def forward(self, x):
        return x * (torch.rand(x.shape[-1]) > 0.1)


train_audio_transforms = torch.nn.Sequential(FrequencyMasking())


def data_processing(data, data_type="train"):
    xs = []
    for x, _ in data:
        if data_type == "train":
            x = train_audio_transforms(x)
        elif data_type == "valid":
            x = x * 1.0
        else:
            raise Exception("data_type should be train or valid")
        xs.append(x)
    return torch.stack(xs), torch.stack([y for _, y in data])
"""

SPEECH_TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from utils import data_processing

data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
train_loader = DataLoader(
    data, batch_size=4, shuffle=True, collate_fn=lambda x: data_processing(x, "train")
)
valid_loader = DataLoader(
    data, batch_size=4, shuffle=False, collate_fn=lambda x: data_processing(x, "valid")
)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in train_loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    for x, y in valid_loader:
        print(torch.nn.functional.mse_loss(model(x), y).item())
"""


def test_the_validation_loaders_collate_makes_no_train_draw(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(SPEECH_UTILS)
    (tmp_path / "train.py").write_text(SPEECH_TRAIN)
    assert _am020(tmp_path) == [8]  # the train loader's, not line 11's


TRANSFORMS = """
import torch


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, im):
        for t in self.transforms:
            im = t(im)
        return im


class RandomFlip:
    def __call__(self, im):
        if torch.rand(1).item() < 0.5:
            im = torch.flip(im, dims=[0])
        return im


class Scale:
    def __call__(self, im):
        return im * 2


def make_transform(is_train=True):
    return Compose([RandomFlip() if is_train else Scale(), Scale()])
"""

PACKAGE_INIT = """
from . import utils
from .base import Points


def load(n, transform=None):
    return Points(n, transform=transform)
"""

BASE = """
import torch
from torch.utils.data import Dataset


class Points(Dataset):
    def __init__(self, n, transform=None):
        self.x = torch.randn(n, 4)
        self.y = torch.randn(n, 1)
        self.transform = transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.y[i]
"""

PROXY_TRAIN = """
import torch

import dataset

dl_tr = torch.utils.data.DataLoader(
    dataset.load(16, transform=dataset.utils.make_transform()), batch_size=4
)
dl_ev = torch.utils.data.DataLoader(
    dataset.load(8, transform=dataset.utils.make_transform(is_train=False)),
    batch_size=4,
)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in dl_tr:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_project_transform_built_by_a_package_modules_function(
    tmp_path: Path,
) -> None:
    package = tmp_path / "dataset"
    package.mkdir()
    (package / "__init__.py").write_text(PACKAGE_INIT)
    (package / "base.py").write_text(BASE)
    (package / "utils.py").write_text(TRANSFORMS)
    (tmp_path / "train.py").write_text(PROXY_TRAIN)
    # the train loader's `make_transform()`, not the evaluation's
    assert _am020(tmp_path) == [7]


SSD_TRAIN = """
import random

import torch
from torch.utils.data import DataLoader

from data import Points


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class RandomMirror:
    def __call__(self, x):
        if random.randint(0, 1):
            x = x.flip(0)
        return x


class Scale:
    def __call__(self, x):
        return x * 2.0


augment = Compose([RandomMirror(), Scale()])
loader = DataLoader(Points(32, transform=augment), batch_size=8, shuffle=True)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_transform_of_the_file_handed_to_an_imported_dataset(
    tmp_path: Path,
) -> None:
    (tmp_path / "data.py").write_text(BASE)
    (tmp_path / "train.py").write_text(SSD_TRAIN)
    assert _am020(tmp_path) == [22]  # `random.randint` in RandomMirror.__call__


CROP_TRANSFORMS = """\
import torchvision.transforms as T


def _crop():
    return T.RandomCrop(28, padding=2)


def make_transform(is_train=True):
    steps = [_crop()]
    if is_train:
        steps.append(T.RandomHorizontalFlip())
    return T.Compose(steps + [T.ToTensor()])
"""

CROP_TRAIN = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import FakeData
from tfs import make_transform

model = torch.nn.Linear(3 * 28 * 28, 10)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ds = FakeData(64, (3, 32, 32), 10, transform=make_transform(is_train=False))
loader = DataLoader(ds, batch_size=8, shuffle=True)
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_an_unguarded_augmentation_built_through_a_helper_beside_a_guarded_one(
    tmp_path: Path,
) -> None:
    # `_crop()`'s RandomCrop runs whatever `is_train` is; only the flip is the
    # training call's (before: the guarded list held the flip alone, and
    # `is_train=False` proved it false: no finding)
    (tmp_path / "tfs.py").write_text(CROP_TRANSFORMS)
    (tmp_path / "train.py").write_text(CROP_TRAIN)
    result = migrate_source(CROP_TRAIN, str(tmp_path / "train.py"), MigrateOptions())
    found = [f for f in result.findings if f.code == "AM020"]
    assert [f.line for f in found] == [8]
    assert "RandomCrop" in found[0].message
