"""Round 24t (a new-user trial on real vision projects, issue 12): a helper
that rebinds the name it returns (Diffusion-Models-pytorch's ``val_dataset =
DataLoader(val_dataset, ...)``), a trainer class that takes its model out of
``**kwargs`` (sthalles/SimCLR), and a batch taken once out of a sharded loader
(pytorch-vqvae's ``fixed_images, _ = next(iter(test_loader))``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

DATA = """
from torch.utils.data import DataLoader, Subset


def get_data(args, train_dataset, val_dataset):
    if args.slice_size > 1:
        val_dataset = Subset(val_dataset, indices=range(0, len(val_dataset), 2))
    train_dataloader = DataLoader(train_dataset, batch_size=args.batch_size, shuffle=True)
    val_dataset = DataLoader(val_dataset, batch_size=2 * args.batch_size)
    return train_dataloader, val_dataset


def branch_rebinds(args, train_dataset, val_dataset):
    loader = DataLoader(train_dataset, batch_size=8)
    val_set = Subset(val_dataset, indices=range(8))
    if args.fast:
        val_set = DataLoader(val_set, batch_size=8)
    return loader, val_set
"""

LOOP = """
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in train_loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_returned_name_is_read_at_its_last_plain_assignment(tmp_path: Path) -> None:
    _write(tmp_path, "data.py", DATA)
    table = dict(read_project(str(_write(tmp_path, "p.py", "import data\n"))).helpers)
    # before: every value of `val_dataset` (a dataset, a Subset, a loader)
    # counted, and the tuple was "a tuple of other values"
    assert table["data.get_data"].items == ("loader", "loader")
    # a rebinding under an `if` may not run: the name's kind is not known
    assert table["data.branch_rebinds"].items == ("loader", "")
    train = _write(
        tmp_path,
        "train.py",
        "import torch\nfrom data import get_data\n"
        "train_loader, val_loader = get_data(args, a, b)\n" + LOOP,
    )
    out = migrate_source(train.read_text(), str(train)).output
    assert "map(accel.prepare_dataloader, get_data(args, a, b))" in out


SIMCLR = """
import torch


class SimCLR(object):
    def __init__(self, *args, **kwargs):
        self.args = kwargs["args"]
        self.model = kwargs["model"].to(self.args.device)
        self.optimizer = kwargs["optimizer"]

    def train(self, train_loader):
        for images, _ in train_loader:
            loss = self.model(images).sum()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""


def test_a_model_taken_out_of_kwargs_is_trained_by_the_class(tmp_path: Path) -> None:
    _write(tmp_path, "simclr.py", SIMCLR)
    table = dict(read_project(str(_write(tmp_path, "p.py", "import simclr\n"))).helpers)
    fact = table["simclr.SimCLR"]
    assert "which it is handed (`__init__`'s `model`)" in fact.trains
    assert fact.trained_parameter == ("model", -1)
    main = _write(
        tmp_path,
        "main.py",
        "import torch\nfrom torch.utils.data import DataLoader\nfrom simclr import SimCLR\n"
        "loader = DataLoader(ds, batch_size=8, drop_last=True)\n"
        "model = torch.nn.Linear(4, 4)\n"
        "optimizer = torch.optim.Adam(model.parameters(), 0.1)\n"
        "SimCLR(model=model, optimizer=optimizer, args=args).train(loader)\n",
    )
    result = migrate_source(main.read_text(), str(main))
    # before: the loader was sharded and the model prepared while the backward
    # ran in simclr.py, unmigrated (with only AM017 said)
    assert not result.changed
    assert any(
        f.code == "AM004" and "hands its arguments to `SimCLR`" in f.message
        for f in result.findings
    ), result.findings


FIXED = """
import torch
from torch.utils.data import DataLoader

train_loader = DataLoader(train_set, batch_size=8)
test_loader = DataLoader(test_set, batch_size=4, shuffle=True)
fixed_images, _ = next(iter(test_loader))
data_iter = iter(train_loader)
x_fixed = next(data_iter)
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters(), 0.1)
for epoch in range(2):
    for x, _ in train_loader:
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
    while True:
        try:
            x, _ = next(data_iter)
        except StopIteration:
            break
        model(x).pow(2).mean().backward()
    print(model(fixed_images).mean().item(), model(x_fixed).mean().item())
"""


def test_a_batch_taken_once_from_a_sharded_loader_is_reported(tmp_path: Path) -> None:
    script = _write(tmp_path, "train.py", FIXED)
    result = migrate_source(script.read_text(), str(script))
    taken = [f for f in result.findings if "is taken once" in f.message]
    assert [(f.code, f.status, f.line) for f in taken] == [
        ("AM006", "needs-review", 7),
        ("AM006", "needs-review", 9),
    ]
    assert taken[0].message.startswith(
        "`fixed_images, _` is taken once with `next(iter(test_loader))` from "
        "`test_loader`, which accel.prepare_dataloader shards"
    )
    # the `next(data_iter)` of a loop that runs a backward is training data
    assert "accel.prepare_dataloader(DataLoader(test_set" in result.output


METHOD = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(8, 8)
optimizer = torch.optim.Adam(model.parameters())


class Trainer:
    def fit(self, loader):
        for (x,) in loader:
            noise = torch.randn(x.size(0), 8)
            loss = (model(x + noise) - x).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


trainer = Trainer()
trainer.fit(DataLoader(TensorDataset(torch.randn(32, 8)), batch_size=8))
Trainer().fit(DataLoader(TensorDataset(torch.randn(32, 8)), batch_size=8))
"""


def test_a_method_of_an_instance_is_bound_to_its_call(tmp_path: Path) -> None:
    """Before, `trainer.fit(loader)` ran no known function: the loop over its
    `loader` parameter was no loader's, and its per-sample draw was neither
    drawn for the global batch nor reported."""
    script = _write(tmp_path, "train.py", METHOD)
    result = migrate_source(script.read_text(), str(script))
    assert (
        "noise = accel.batch_draw(x.size(0), lambda rows: torch.randn(rows, 8))"
        in result.output
    )
    assert not [f for f in result.findings if f.status == "needs-review"]
