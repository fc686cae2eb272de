"""Loaders returned in a tuple or dict, and optimizers a model class's method hands
back (issue 12): facts of local modules read from disk, and what the rules make
of them."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

DATA = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from torchvision.datasets import MNIST


def get_loaders(train_set, val_set):
    train_loader = DataLoader(train_set, batch_size=8, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=8)
    return train_loader, val_loader


def get_dict(train_set, val_set):
    return {"train": DataLoader(train_set, batch_size=8), "val": DataLoader(val_set)}


def loader_and_size(train_set):
    return DataLoader(train_set, batch_size=8), len(train_set)


def loader_and_set(train_set):
    return DataLoader(train_set, batch_size=8), train_set


class Toy(TensorDataset):
    pass


def _toy(n):
    return Toy(torch.randn(n, 4))


def loader_and_built_set(n):
    train_set = _toy(n)
    return DataLoader(train_set, batch_size=8), train_set


def loader_and_mnist(root):
    return DataLoader(TensorDataset(torch.randn(8, 4))), MNIST(root)


def loader_and_other(n):
    return DataLoader(TensorDataset(torch.randn(8, 4))), Toy.__name__
"""

LOOP = """
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in train_loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
correct = 0
for x, y in val_loader:
    correct += (model(x).argmax(1) == y).sum().item()
print(correct / len(val_loader.dataset))
"""

MODEL = """
import torch
import torch.nn as nn


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 2)

    def configure_optimizers(self, cfg):
        decay = [p for n, p in self.named_parameters() if n.endswith("weight")]
        rest = [p for n, p in self.named_parameters() if not n.endswith("weight")]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest}]
        return torch.optim.AdamW(groups, lr=cfg.lr)

    def other_optimizer(self, other):
        return torch.optim.SGD(other.parameters(), lr=0.1)

    def forward(self, x, y):
        logits = self.head(x)
        return logits, nn.functional.cross_entropy(logits, y)
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_tuple_of_loaders_from_a_module_is_prepared_and_its_sums_reduced(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "data.py", DATA)
    train = _write(
        tmp_path,
        "train.py",
        "import torch\nfrom data import get_loaders\n"
        "train_loader, val_loader = get_loaders(a, b)\n" + LOOP,
    )
    probe = _write(tmp_path, "probe.py", "import data\n")
    table = dict(read_project(str(probe)).helpers)
    assert (table["data.get_loaders"].container, table["data.get_loaders"].items) == (
        "tuple",
        ("loader", "loader"),
    )
    assert table["data.get_dict"].container == "dict"
    # a number beside the loader: prepared with accel.prepare_dataloaders
    assert table["data.loader_and_size"].items == ("loader", "number")
    assert table["data.loader_and_set"].items == ("loader", "")  # a parameter
    # a dataset built by the module (its class, through a function) or by
    # torchvision: surely no loader, handed back by accel.prepare_dataloaders
    assert table["data.loader_and_built_set"].items == ("loader", "dataset")
    assert table["data.loader_and_mnist"].items == ("loader", "dataset")
    assert table["data.loader_and_other"].items == ("loader", "")
    result = migrate_source(train.read_bytes(), str(train))
    out = result.output.decode()  # type: ignore[union-attr]
    assert (
        "train_loader, val_loader = map(accel.prepare_dataloader, get_loaders(a, b))"
        in out
    )
    assert "correct = accel.reduce(correct)" in out
    # a second run sees the prepared loaders and changes nothing
    train.write_text(out)
    assert not migrate_source(train.read_bytes(), str(train)).changed


def test_loaders_not_unpacked_one_name_each_leave_the_file_unchanged(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "data.py", DATA)
    cases = {
        "loaders = get_loaders(a, b)\ntrain_loader, val_loader = loaders\n": (
            "not unpacked into one name per loader"
        ),
        "train_loader = get_dict(a, b)['train']\nval_loader = get_dict(a, b)['val']\n": (
            "not kept in one variable"
        ),
        # the item it cannot classify, named with why (not "a tuple of other values")
        "train_loader, n = loader_and_set(a)\nval_loader = train_loader\n": (
            "but item 2, `train_set`, is a parameter of `loader_and_set` handed "
            "back as its caller gave it"
        ),
    }
    for head, reason in cases.items():
        train = _write(
            tmp_path,
            "train.py",
            "import torch\nfrom data import get_loaders, get_dict, loader_and_set\n"
            + head
            + LOOP,
        )
        result = migrate_source(train.read_bytes(), str(train))
        assert not result.changed, head
        assert any(
            f.code == "AM006" and f.status == "needs-review" and reason in f.message
            for f in result.findings
        ), (head, result.findings)


def test_a_dict_of_loaders_is_prepared_where_it_is_kept(tmp_path: Path) -> None:
    """Each loader of the dict is prepared under its key; the loaders taken out of
    it are loaders for the other rules (the sum over the validation loader is
    reduced)."""
    _write(tmp_path, "data.py", DATA)
    train = _write(
        tmp_path,
        "train.py",
        "import torch\nfrom data import get_dict\nd = get_dict(a, b)\n"
        "train_loader, val_loader = d['train'], d['val']\n" + LOOP,
    )
    result = migrate_source(train.read_text(), str(train))
    assert (
        "d = {key: accel.prepare_dataloader(loader) for key, loader in "
        "get_dict(a, b).items()}" in result.output
    )
    assert "correct = accel.reduce(correct)" in result.output
    assert not [f for f in result.findings if f.status == "needs-review"]
    again = migrate_source(result.output, str(train))
    assert again.output == result.output, "a second pass changes nothing"


def test_configure_optimizers_of_an_imported_model_class(tmp_path: Path) -> None:
    _write(tmp_path, "model.py", MODEL)
    table = dict(read_project(str(_write(tmp_path, "t.py", "import model\n"))).helpers)
    # `other_optimizer` builds an optimizer, but not over the instance's parameters
    assert table["model.GPT"].optimizer_methods == ("configure_optimizers",)
    script = (
        "import torch\nfrom model import GPT\nfrom torch.utils.data import DataLoader\n"
        "model = GPT()\noptimizer = model.{method}(cfg)\n"
        "loader = DataLoader(ds, batch_size=8)\n"
        "for x, y in loader:\n    logits, loss = model(x, y)\n"
        "    model.zero_grad()\n    loss.backward()\n    optimizer.step()\n"
    )
    train = _write(tmp_path, "train.py", script.format(method="configure_optimizers"))
    out = migrate_source(train.read_bytes(), str(train)).output.decode()  # type: ignore[union-attr]
    assert "model = accel.prepare_model(GPT())" in out
    assert "optimizer = accel.prepare_optimizer(model.configure_optimizers(cfg))" in out
    # an optimizer that is not shown to be the model's: nothing is migrated
    train.write_text(script.format(method="other_optimizer"))
    result = migrate_source(train.read_bytes(), str(train))
    assert not result.changed
    assert any(
        f.code == "AM004" and f.status == "needs-review" for f in result.findings
    )


def test_library_trainer_with_a_while_loop_is_left_whole(tmp_path: Path) -> None:
    """minGPT's Trainer.run: `while True: batch = next(data_iter)`, the model handed
    in by the caller, the optimizer from `model.configure_optimizers(config)`."""
    trainer = _write(
        tmp_path,
        "trainer.py",
        "import torch\nfrom torch.utils.data import DataLoader\n\n\n"
        "class Trainer:\n"
        "    def __init__(self, config, model, dataset):\n"
        "        self.config, self.model, self.dataset = config, model, dataset\n\n"
        "    def run(self):\n"
        "        model = self.model\n"
        "        optimizer = model.configure_optimizers(self.config)\n"
        "        loader = DataLoader(self.dataset, batch_size=8, shuffle=True)\n"
        "        model.train()\n"
        "        data_iter = iter(loader)\n"
        "        while True:\n"
        "            x, y = next(data_iter)\n"
        "            logits, self.loss = model(x, y)\n"
        "            model.zero_grad()\n"
        "            self.loss.backward()\n"
        "            optimizer.step()\n",
    )
    result = migrate_source(trainer.read_bytes(), str(trainer))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert blocking and "model.configure_optimizers(self.config)" in (
        blocking[0].message
    )


def test_star_imports_resolve_through_public_names(tmp_path: Path) -> None:
    _write(tmp_path, "data.py", DATA)
    train = _write(
        tmp_path,
        "train.py",
        "import torch\nfrom data import *\n"
        "train_loader, val_loader = get_loaders(a, b)\n" + LOOP,
    )
    facts = read_project(str(train))
    assert facts.star_names is not None and "get_loaders" in facts.star_names
    out = migrate_source(train.read_bytes(), str(train)).output.decode()  # type: ignore[union-attr]
    assert "map(accel.prepare_dataloader, get_loaders(a, b))" in out
    assert "correct = accel.reduce(correct)" in out
    # `__all__` decides what a star import binds; one built at run time is unknown
    (tmp_path / "data.py").write_text(DATA + "\n__all__ = ['get_dict']\n")
    assert "<star>.get_loaders" not in dict(read_project(str(train)).helpers)
    (tmp_path / "data.py").write_text(DATA + "\n__all__ = [n for n in dir()]\n")
    facts = read_project(str(train))
    assert facts.star_names is None and not facts.helpers
    # ... and so is a star import of a module that is not local
    (tmp_path / "data.py").write_text(DATA)
    train.write_text(
        train.read_text().replace("import *\n", "import *\nfrom os import *\n")
    )
    assert not read_project(str(train)).helpers


def test_star_reexport_in_a_package(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    _write(tmp_path / "lib", "__init__.py", "from .data import *\n")
    _write(tmp_path / "lib", "data.py", DATA)
    probe = _write(tmp_path, "probe.py", "from lib import get_loaders\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["lib.get_loaders"].items == ("loader", "loader")
