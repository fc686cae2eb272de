"""Hand-written batch iterators of a project (round 25b: Chinese-Text-
Classification-Pytorch's ``DatasetIterater``, built by ``build_iterator`` and
handed to ``train(config, model, train_iter, ...)`` of another module). AM019
names the iterator class and its file where the loop runs a backward over one:
over a function's result in the script, and over a parameter every caller of
the batch hands one; a function that wraps a loader, or returns something else,
is not one."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

UTILS = """\
import torch


class DatasetIterater(object):
    def __init__(self, batches, batch_size):
        self.batches, self.batch_size, self.index = batches, batch_size, 0
        self.n_batches = len(batches) // batch_size

    def __next__(self):
        if self.index >= self.n_batches:
            self.index = 0
            raise StopIteration
        part = self.batches[self.index * self.batch_size : (self.index + 1) * self.batch_size]
        self.index += 1
        return torch.stack([p[0] for p in part]), torch.stack([p[1] for p in part])

    def __iter__(self):
        return self

    def __len__(self):
        return self.n_batches


class Prefetcher(object):
    def __init__(self, loader):
        self.loader = loader

    def __iter__(self):
        return iter(self.loader)


class Config(object):
    def __init__(self):
        self.batch_size = 4


def build_iterator(dataset, config):
    iter = DatasetIterater(dataset, config.batch_size)
    return iter


def prefetch(loader):
    return Prefetcher(loader)


def build_config():
    return Config()
"""

TRAIN = """\
import torch
import torch.nn.functional as F


def train(config, model, train_iter):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(2):
        for i, (x, y) in enumerate(train_iter):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
"""

MAIN = """\
import torch

from train_eval import train
from utils import build_iterator, Config

data = [(torch.randn(3), torch.randn(1)) for _ in range(16)]
config = Config()
model = torch.nn.Linear(3, 1)
train_iter = build_iterator(data, config)
train(config, model, train_iter)
"""

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from utils import Config, build_iterator, prefetch

data = [(torch.randn(3), torch.randn(1)) for _ in range(16)]
model = torch.nn.Linear(3, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
train_iter = {made}
for x, y in train_iter:
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _write(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "train_eval.py").write_text(TRAIN)
    (tmp_path / "main.py").write_text(MAIN)


def test_the_view_names_iterator_classes_and_their_factories(tmp_path: Path) -> None:
    _write(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text("import utils\n")
    table = dict(read_project(str(probe)).helpers)
    phrase = (
        "`DatasetIterater` of utils.py, a hand-written batch iterator "
        "(`__next__`, `__iter__`)"
    )
    assert table["utils.DatasetIterater"].batch_iterator == phrase
    assert table["utils.build_iterator"].batch_iterator == (
        f"which returns an instance of {phrase}"
    )
    assert table["utils.Config"].batch_iterator == ""
    assert table["utils.build_config"].batch_iterator == ""


def _am019(source: str, path: Path, options: MigrateOptions) -> list[str]:
    path.write_text(source)
    result = migrate_source(source, str(path), options)
    return [f.message for f in result.findings if f.code == "AM019"]


def test_am019_names_the_class_of_a_factory_the_script_loops_over(
    tmp_path: Path,
) -> None:
    _write(tmp_path)
    script = tmp_path / "script.py"
    source = SCRIPT.format(made="build_iterator(data, Config())")
    (message,) = _am019(source, script, MigrateOptions())
    assert message.startswith(
        "the loop over `train_iter` (`build_iterator` of utils.py, which returns "
        "an instance of `DatasetIterater` of utils.py, a hand-written batch "
        "iterator (`__next__`, `__iter__`), not a torch DataLoader) is not split "
        "across processes"
    )


@pytest.mark.parametrize(
    "made",
    [
        "prefetch(DataLoader(data, batch_size=4))",
        "prefetch(loader)",
    ],
)
def test_a_factory_wrapping_a_loader_is_not_reported(tmp_path: Path, made: str) -> None:
    _write(tmp_path)
    script = tmp_path / "script.py"
    source = SCRIPT.format(made=made).replace(
        "train_iter =", "loader = DataLoader(data, batch_size=4)\ntrain_iter ="
    )
    assert _am019(source, script, MigrateOptions()) == []


def test_am019_names_the_iterator_every_caller_hands_the_loop(
    tmp_path: Path,
) -> None:
    _write(tmp_path)
    files = [str(tmp_path / n) for n in ("main.py", "train_eval.py", "utils.py")]
    view = ProjectView(files)
    target = tmp_path / "train_eval.py"
    options = MigrateOptions(project=view.facts_for(str(target)))
    (message,) = _am019(TRAIN, target, options)
    assert message.startswith(
        "the loop over `enumerate(train_iter)` (`train_iter`, a parameter that "
        "every call from the batch's other files (main.py:10) hands "
        "`build_iterator(...)` of utils.py, which returns an instance of "
        "`DatasetIterater` of utils.py"
    )


def test_a_parameter_handed_a_loader_is_not_reported(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "main.py").write_text(
        MAIN.replace(
            "train_iter = build_iterator(data, config)",
            "train_iter = torch.utils.data.DataLoader(data, batch_size=4)",
        )
    )
    files = [str(tmp_path / n) for n in ("main.py", "train_eval.py", "utils.py")]
    view = ProjectView(files)
    target = tmp_path / "train_eval.py"
    options = MigrateOptions(project=view.facts_for(str(target)))
    assert _am019(TRAIN, target, options) == []


SAMPLER = """\
import torch


class NeighborSampler(torch.utils.data.DataLoader):
    def __init__(self, node_idx, sizes, **kwargs):
        self.sizes = sizes
        super().__init__(node_idx.tolist(), collate_fn=self.sample, **kwargs)

    def sample(self, batch):
        return torch.tensor(batch)
"""

SAMPLER_SCRIPT = """\
import torch

from sampler import NeighborSampler

model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_loader = NeighborSampler(torch.arange(8), [2], batch_size=4, shuffle=True)
for batch in train_loader:
    optimizer.zero_grad()
    model(batch.float().unsqueeze(1)).sum().backward()
    optimizer.step()
"""


def test_a_dataloader_subclass_of_the_project_is_named_as_one(tmp_path: Path) -> None:
    """pyg's NeighborSampler written in sampler.py: AM019 said "not a torch
    DataLoader" of a class that derives from one."""
    (tmp_path / "sampler.py").write_text(SAMPLER)
    script = tmp_path / "main.py"
    script.write_text(SAMPLER_SCRIPT)
    fact = dict(read_project(str(script)).helpers)["sampler.NeighborSampler"]
    assert fact.loader_subclass
    result = migrate_source(script.read_bytes(), str(script))
    (finding,) = [f for f in result.findings if f.code == "AM019"]
    assert finding.message.startswith(
        "the loop over `train_loader` (`NeighborSampler`, a class of sampler.py "
        "derived from torch's DataLoader, which accel-migrate does not prepare) "
        "is not split across processes"
    )
