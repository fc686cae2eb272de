"""Shapes of the Kaggle competition notebooks (t14b, Cassava Leaf Disease):
a transform factory of the project (``get_train_transforms()`` returning
``Compose([Flip(0.5)])`` of its own classes, whose ``__call__`` draws with
``random.random``) handed to a dataset (AM020), and predictions collected per
batch with ``xs += [p.cpu().numpy()]`` (AM029, as ``xs.append(...)``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source

DATASET = """
import random

import torch
from torch.utils.data import Dataset


class Flip(object):
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if random.random() < self.p:
            return torch.flip(img, dims=(1,))
        return img


class Scale(object):
    def __call__(self, img):
        return img * 0.5


class Compose(object):
    def __init__(self, ts):
        self.ts = ts

    def __call__(self, img):
        for t in self.ts:
            img = t(img)
        return img


def get_train_transforms():
    return Compose([Flip(0.5), Scale()])


def get_valid_transforms():
    return Compose([Scale()])


class Leaves(Dataset):
    def __init__(self, n, transforms=None):
        self.x = torch.randn(n, 3, 4, 4)
        self.y = torch.arange(n) % 3
        self.transforms = transforms

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        img = self.x[i]
        if self.transforms:
            img = self.transforms(img)
        return img, self.y[i]
"""

HEAD = """
import numpy as np
import torch
from torch.utils.data import DataLoader
from dataset import Leaves, get_train_transforms, get_valid_transforms

model = torch.nn.Linear(48, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""

TRAIN = """
for xb, yb in train_loader:
    loss = torch.nn.functional.cross_entropy(model(xb.flatten(1)), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

VALID = """
preds_all = []
targets_all = []
with torch.no_grad():
    for xb, yb in val_loader:
        preds_all += [torch.argmax(model(xb.flatten(1)), 1).detach().cpu().numpy()]
        targets_all += [yb.detach().cpu().numpy()]
preds_all = np.concatenate(preds_all)
targets_all = np.concatenate(targets_all)
print("eval accuracy", (preds_all == targets_all).mean())
"""


def _migrate(tmp_path: Path, body: str):
    (tmp_path / "dataset.py").write_text(DATASET)
    script = tmp_path / "train.py"
    source = HEAD + body
    script.write_text(source)
    return migrate_source(source, str(script), MigrateOptions())


def test_a_transform_factory_of_drawing_classes_is_reported(tmp_path: Path) -> None:
    result = _migrate(
        tmp_path,
        "train_loader = DataLoader(Leaves(16, transforms=get_train_transforms()),"
        " batch_size=4, shuffle=True)\n" + TRAIN,
    )
    found = [f for f in result.findings if f.code == "AM020"]
    assert len(found) == 1, [f.message for f in found]
    assert found[0].status == "needs-review"
    assert "built by `get_train_transforms` in dataset.py" in found[0].message
    # the draw and the project class that makes it (draw_guards' spelling)
    assert "`random.random` (in `Flip`)" in found[0].message


def test_a_deterministic_transform_factory_is_not_reported(tmp_path: Path) -> None:
    result = _migrate(
        tmp_path,
        "train_loader = DataLoader(Leaves(16, transforms=get_valid_transforms()),"
        " batch_size=4, shuffle=True)\n" + TRAIN,
    )
    assert not [f for f in result.findings if f.code == "AM020"]
    assert "accel.prepare_dataloader(" in str(result.output)


def test_predictions_added_as_one_element_lists_are_gathered(tmp_path: Path) -> None:
    result = _migrate(
        tmp_path,
        "train_loader = DataLoader(Leaves(16), batch_size=4, shuffle=True)\n"
        "val_loader = DataLoader(Leaves(10), batch_size=4)\n" + TRAIN + VALID,
    )
    code = str(result.output)
    assert (
        "preds_all = accel.gather_in_order(preds_all, val_loader, per_batch=True)"
        in code
    )
    assert (
        "targets_all = accel.gather_in_order(targets_all, val_loader, per_batch=True)"
        in code
    )
    # gathered after the loop, before the concatenation reads them
    assert code.index("gather_in_order(preds_all") < code.index(
        "preds_all = np.concatenate"
    )
    fixed = [f for f in result.findings if f.code == "AM029"]
    assert len(fixed) == 2 and all(f.status == "fixed" for f in fixed)


def test_per_batch_numbers_as_one_element_lists_are_not_gathered(
    tmp_path: Path,
) -> None:
    # `losses += [loss.item()]` is a number per batch, not outputs: never
    # gathered in order (the runtime would fail on it)
    body = (
        "train_loader = DataLoader(Leaves(16), batch_size=4, shuffle=True)\n"
        "losses = []\n"
        "for xb, yb in train_loader:\n"
        "    loss = torch.nn.functional.cross_entropy(model(xb.flatten(1)), yb)\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    losses += [loss.item()]\n"
    )
    result = _migrate(tmp_path, body)
    assert "gather_in_order(losses" not in str(result.output)


CAT_BODY = (
    """
train_loader = DataLoader(Leaves(16), batch_size=4, shuffle=True)
val_loader = DataLoader(Leaves(10), batch_size=4)
"""
    + TRAIN
    + """
gt = torch.LongTensor()
pred = torch.FloatTensor()
probs = np.zeros((0, 3))
with torch.no_grad():
    for xb, yb in val_loader:
        out = model(xb.flatten(1))
        gt = torch.cat((gt, yb), 0)
        pred = torch.cat([pred, out.softmax(1)], dim=0)
        probs = np.concatenate([probs, out.numpy()])
        wide = torch.cat((out, out), 1)
print("eval acc", (pred.argmax(1) == gt).float().mean().item(), probs.shape, wide.shape)
"""
)


def test_tensors_grown_by_joining_batches_are_reported(tmp_path: Path) -> None:
    # arnoweng/CheXNet: `gt = torch.cat((gt, target), 0)` over the val loader,
    # then an AUROC over the whole set: each process's share only
    result = _migrate(tmp_path, CAT_BODY)
    found = sorted((f.line, f.message) for f in result.findings if f.code == "AM029")
    names = [message.split("`")[1] for _, message in found]
    assert names == ["gt", "pred", "probs"], found
    assert all(f.status == "needs-review" for f in result.findings if f.code == "AM029")
    assert "`np.concatenate` of itself" in found[2][1]
    assert "this process's share of the rows" in found[0][1]


PHASES = """
import torch
from torch.utils.data import DataLoader, TensorDataset


def train_model(model, optimizer, dataloaders):
    for phase in ["train", "val"]:
        gt = torch.FloatTensor()
        for xb, yb in dataloaders[phase]:
            out = model(xb).squeeze(1)
            loss = torch.nn.functional.mse_loss(out, yb)
            if phase == "train":
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            else:
                gt = torch.cat((gt, yb), 0)
        print("eval", phase, len(gt))


model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataloaders = {}
dataloaders["train"] = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16)), batch_size=4)
dataloaders["val"] = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8)), batch_size=4)
train_model(model, optimizer, dataloaders)
"""


def test_loaders_stored_item_by_item_are_loops_over_loaders(tmp_path: Path) -> None:
    # reproduce-chexnet: `dataloaders = {}`, `dataloaders['train'] =
    # DataLoader(...)`, then `for data in dataloaders[phase]` in train_model
    script = tmp_path / "train.py"
    script.write_text(PHASES)
    result = migrate_source(PHASES, str(script), MigrateOptions())
    found = [f for f in result.findings if f.code == "AM029"]
    assert len(found) == 1 and "`gt` joins the outputs" in found[0].message, [
        (f.code, f.message) for f in result.findings
    ]
    assert str(result.output).count("accel.prepare_dataloader(") == 2


def test_a_dict_holding_other_values_is_not_a_loader_container(tmp_path: Path) -> None:
    source = PHASES.replace(
        "\ntrain_model(model, optimizer, dataloaders)",
        '\ndataloaders["sizes"] = 3\ntrain_model(model, optimizer, dataloaders)',
    )
    script = tmp_path / "train.py"
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    assert not [f for f in result.findings if f.code == "AM029"]
