"""A save in code the data loader runs per sample is left as it is and reported
(AM010, ``data_pipeline.loader_run_functions``), also where it is reached
through a method of another local object the Dataset holds
(``self.cache.put(i, feat)``) and where the dataset is a class that derives
from no Dataset and reaches the loader through ``Subset``, ``ConcatDataset`` or
``random_split``. A save the training loop makes through its own object stays
a main-process save."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source

TRAIN = """
def main():
    loader = DataLoader({dataset}, batch_size=8, shuffle=True)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
"""

DUCK = """\
import os

import torch
from torch import nn
from torch.utils.data import ConcatDataset, DataLoader, Subset, random_split


class Samples:
    def __init__(self, n):
        self.x = torch.randn(n, 6)
        self.y = torch.randn(n, 1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        path = f"cache/{{i}}.pt"
        if not os.path.exists(path):
            torch.save(self.x[i], path)
        return torch.load(path), self.y[i]

{setup}
"""


def _am010(tmp_path: Path, source: str) -> list[str]:
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    return [f"{f.status} {f.message}" for f in result.findings if f.code == "AM010"]


@pytest.mark.parametrize(
    "setup, dataset",
    [
        ("", "Subset(Samples(40), range(32))"),
        ("", "ConcatDataset([Samples(20), Samples(20)])"),
        ("", "dataset=random_split(Samples(40), [32, 8])[0]"),
        ("train_set, val_set = random_split(Samples(40), [32, 8])\n", "train_set"),
        ("splits = random_split(Samples(40), [32, 8])\n", "splits[0]"),
        # a list variable handed to ConcatDataset
        ("parts = [Samples(20), Samples(20)]\n", "ConcatDataset(parts)"),
        ("", "ConcatDataset((Samples(20), Samples(20)))"),
    ],
)
def test_a_duck_typed_dataset_behind_a_wrapper_keeps_its_save(
    tmp_path: Path, setup: str, dataset: str
) -> None:
    source = DUCK.format(setup=setup) + TRAIN.format(dataset=dataset)
    findings = _am010(tmp_path, source)
    assert len(findings) == 1, findings
    assert findings[0].startswith(
        "needs-review torch.save in `Samples.__getitem__`, which the data loader runs"
    )


WRAP = """
class Wrap(torch.utils.data.Dataset):
    def __init__(self, base):
        self.base = base

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return self.base[i]
"""


@pytest.mark.parametrize("dataset", ["Wrap(Samples(32))", "Wrap(base=Samples(32))"])
def test_a_duck_typed_dataset_a_local_wrapper_subscripts_keeps_its_save(
    tmp_path: Path, dataset: str
) -> None:
    # `return self.base[i]` runs the held object's __getitem__ for each sample
    source = DUCK.format(setup=WRAP) + TRAIN.format(dataset=dataset)
    findings = _am010(tmp_path, source)
    assert findings == [
        "needs-review torch.save in `Samples.__getitem__`, called from "
        "`Wrap.__getitem__`, which the data loader runs for each sample: "
        + findings[0].split("for each sample: ", 1)[1]
    ], findings


def test_a_duck_typed_class_no_loader_reads_is_a_plain_save(tmp_path: Path) -> None:
    source = DUCK.format(setup="") + TRAIN.format(
        dataset="torch.utils.data.TensorDataset(torch.randn(32, 6), torch.randn(32, 1))"
    )
    findings = _am010(tmp_path, source)
    assert findings and all(f.startswith("fixed") for f in findings), findings


CACHE = """\
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Cache:
    def __init__(self, root):
        self.root = root

    def put(self, key, value):
        torch.save(value, os.path.join(self.root, f"{{key}}.pt"))


class Saver:
    def __init__(self, path):
        self.path = path

    def write(self, model):
        torch.save(model.state_dict(), self.path)


class Samples(Dataset):
    def __init__(self, n, cache):
        self.x = torch.randn(n, 6)
        self.y = torch.randn(n, 1)
        self.cache = {cache}

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        self.cache.put(i, self.x[i])
        return self.x[i], self.y[i]
"""


@pytest.mark.parametrize("cache", ["Cache('cache')", "cache"])
def test_a_save_in_a_method_of_an_object_the_dataset_holds_is_kept(
    tmp_path: Path, cache: str
) -> None:
    source = CACHE.format(cache=cache) + TRAIN.format(
        dataset="Samples(32, Cache('cache'))"
    )
    source += "    Saver('last.pt').write(model)\n"
    findings = _am010(tmp_path, source)
    assert findings[0].startswith(
        "needs-review torch.save in `Cache.put`, called from `Samples.__getitem__`"
    ), findings
    # the training loop's own checkpoint object is not run by the loader
    assert findings[1:] == ["fixed torch.save -> accel.save (main process, atomic)"]


SHARED = """\
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Store:
    def __init__(self, root):
        self.root = root

    def put(self, name, obj):
        {put}

    def _write(self, name, obj):
        torch.save(obj, os.path.join(self.root, name))


class Samples(Dataset):
    def __init__(self, n, store):
        self.x = torch.randn(n, 6)
        self.y = torch.randn(n, 1)
        self.store = store

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        self.store.put(f"s{{i}}.pt", self.x[i])
        return self.x[i], self.y[i]


def main():
    store = Store("out")
    loader = DataLoader(Samples(32, store), batch_size=8, shuffle=True)
    model = nn.Linear(6, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    {checkpoint}
"""


@pytest.mark.parametrize(
    "put",
    [
        "torch.save(obj, os.path.join(self.root, name))",
        "self._write(name, obj)",  # the save one call further in
    ],
)
def test_a_save_run_per_sample_and_by_the_training_loop_leaves_the_file_whole(
    tmp_path: Path, put: str
) -> None:
    source = SHARED.format(
        put=put, checkpoint='store.put("model.pt", model.state_dict())'
    )
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    assert result.output == source  # not `accel.state_dict(model)` into a kept save
    am010 = [f for f in result.findings if f.code == "AM010"]
    assert len(am010) == 1, am010
    assert am010[0].status == "needs-review"
    assert "called from `Samples.__getitem__`" in am010[0].message
    assert "also run by `store.put(...)` at line 42" in am010[0].message
    assert "the file is left whole" in am010[0].message


def test_a_save_run_per_sample_only_is_kept_and_the_file_migrated(
    tmp_path: Path,
) -> None:
    source = SHARED.format(put="self._write(name, obj)", checkpoint='print("done")')
    findings = _am010(tmp_path, source)
    assert len(findings) == 1, findings
    assert findings[0].startswith("needs-review torch.save in `_write`, called from")
    assert "also run by" not in findings[0]
    script = tmp_path / "main.py"
    assert "accel.prepare_model" in migrate_source(source, str(script)).output
