"""AM019 on a training loop whose batches come from a source no process splits
while the model is prepared (``unsplit_sources``): a loader held by a helper
module's object (pytorch-center-loss), one taken out of the lists a helper
returns (DKT, batch mode), a generator method (LSTNet's ``get_batches``), a
sampler's ``next_batch()`` (SASRec). Before, each migrated with no finding:
every process trained the whole batch (the same numbers, no speed-up)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.findings import Finding
from accel_migrate.codemod.project_view import ProjectView

DATASETS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


class MNIST(object):
    def __init__(self, batch_size):
        data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
        self.trainloader = DataLoader(data, batch_size=batch_size, shuffle=True)
        self.testloader = DataLoader(data, batch_size=batch_size)


def create(batch_size):
    return MNIST(batch_size)


class Data_utility(object):
    def __init__(self, n):
        self.X = torch.randn(n, 4)
        self.Y = torch.randn(n, 1)

    def get_batches(self, inputs, targets, batch_size):
        index = torch.randperm(len(inputs))
        for start in range(0, len(inputs), batch_size):
            excerpt = index[start:start + batch_size]
            yield inputs[excerpt], targets[excerpt]


class WarpSampler(object):
    def __init__(self, n, batch_size):
        self.n = n
        self.batch_size = batch_size

    def next_batch(self):
        return torch.randn(self.batch_size, 4), torch.randn(self.batch_size, 1)


def getLoader():
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    return [DataLoader(data, batch_size=4, shuffle=True)], []
"""

HELD = """\
import torch
import torch.nn.functional as F

import datasets


def train(model, trainloader, optimizer):
    for x, y in trainloader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


dataset = datasets.create(batch_size=4)
trainloader, testloader = dataset.trainloader, dataset.testloader
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    train(model, trainloader, optimizer)
"""

GENERATOR = """\
import torch
import torch.nn.functional as F

from datasets import Data_utility


def train(data, X, Y, model, optimizer):
    for x, y in data.get_batches(X, Y, 4):
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        optimizer.step()


Data = Data_utility(16)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    train(Data, Data.X, Data.Y, model, optimizer)
"""

SAMPLER = """\
import torch
import torch.nn.functional as F

from datasets import WarpSampler

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
sampler = WarpSampler(16, batch_size=4)
for epoch in range(2):
    for step in range(4):
        x, y = sampler.next_batch()
        optimizer.zero_grad()
        F.mse_loss(model(x), y).backward()
        optimizer.step()
"""


def _project(tmp_path: Path, main: str) -> Path:
    (tmp_path / "datasets.py").write_text(DATASETS)
    script = tmp_path / "main.py"
    script.write_text(main)
    return script


def _unsplit(source: str, path: Path) -> list[Finding]:
    result = migrate_source(source, str(path))
    assert result.changed
    return [
        f
        for f in result.findings
        if f.code == "AM019" and "training batches are not split" in f.message
    ]


def test_a_loader_held_by_a_helpers_object_is_reported_at_its_loop(
    tmp_path: Path,
) -> None:
    script = _project(tmp_path, HELD)
    result = migrate_source(HELD, str(script))
    assert "accel.prepare_model(" in result.output
    assert "accel.prepare_dataloader" not in result.output  # nothing new sharded
    (finding,) = _unsplit(HELD, script)
    assert (finding.line, finding.status) == (8, "needs-review")
    assert "this loop takes them from `dataset.trainloader` (line 15)" in (
        finding.message
    )
    assert "every process trains on the whole of every batch" in finding.message
    assert "accel.prepare_dataloader(...)" in finding.message


def test_a_generator_method_of_a_helpers_object_is_reported(tmp_path: Path) -> None:
    script = _project(tmp_path, GENERATOR)
    (finding,) = _unsplit(GENERATOR, script)
    assert finding.line == 8
    assert "`data.get_batches(X, Y, 4)` (line 8)" in finding.message


def test_a_samplers_next_batch_is_reported(tmp_path: Path) -> None:
    script = _project(tmp_path, SAMPLER)
    (finding,) = _unsplit(SAMPLER, script)
    assert finding.line == 10
    assert (
        "`sampler.next_batch()` (line 11) on `sampler`, `WarpSampler`, a class "
        "of datasets.py"
    ) in finding.message


def test_a_loader_of_this_files_own_class_is_prepared_not_reported(
    tmp_path: Path,
) -> None:
    """The class is in the migrated file: AM006 wraps its DataLoader there."""
    own = (
        DATASETS.split("\n\ndef create")[0]
        + "\n\n"
        + HELD.replace("import datasets\n", "").replace(
            "datasets.create(batch_size=4)", "MNIST(4)"
        )
    )
    script = tmp_path / "main.py"
    script.write_text(own)
    result = migrate_source(own, str(script))
    assert "accel.prepare_dataloader(DataLoader(" in result.output
    assert not [f for f in result.findings if f.code == "AM019"]


def test_a_parameter_no_call_here_hands_is_not_reported(tmp_path: Path) -> None:
    """``train`` is never called in this file (file mode): its loader may be
    prepared by a caller elsewhere, so nothing is said."""
    source = HELD.split("\n\ndataset = ")[0] + (
        "\n\nmodel = torch.nn.Linear(4, 2)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    )
    script = _project(tmp_path, source)
    assert _unsplit(source, script) == []


def test_a_loader_a_helper_function_returns_is_prepared_not_reported(
    tmp_path: Path,
) -> None:
    (tmp_path / "loaders.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n\n"
        "def get_loader():\n"
        "    data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))\n"
        "    return DataLoader(data, batch_size=4, shuffle=True)\n"
    )
    source = HELD.replace("import datasets\n", "import loaders\n").replace(
        "dataset.trainloader, dataset.testloader",
        "loaders.get_loader(), loaders.get_loader()",
    )
    script = _project(tmp_path, source)
    result = migrate_source(source, str(script))
    assert "accel.prepare_dataloader(loaders.get_loader())" in result.output
    assert not [f for f in result.findings if f.code == "AM019"]


def test_batch_mode_a_loader_out_of_a_helpers_lists_is_reported(
    tmp_path: Path,
) -> None:
    """DKT: ``train(trainLoaders, ...)`` in engine.py, handed by main.py the
    lists ``getLoader()`` returns; the loop over ``trainLoaders[i]``."""
    (tmp_path / "datasets.py").write_text(DATASETS)
    engine = tmp_path / "engine.py"
    engine.write_text(
        "import torch.nn.functional as F\n\n\n"
        "def train_epoch(model, trainLoader, optimizer):\n"
        "    for x, y in trainLoader:\n"
        "        optimizer.zero_grad()\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "        optimizer.step()\n\n\n"
        "def train(trainLoaders, model, optimizer):\n"
        "    for i in range(len(trainLoaders)):\n"
        "        train_epoch(model, trainLoaders[i], optimizer)\n"
    )
    main = tmp_path / "main.py"
    main.write_text(
        "import torch\n\nimport engine\nfrom datasets import getLoader\n\n"
        "model = torch.nn.Linear(4, 1)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "trainLoaders, testLoaders = getLoader()\n"
        "for epoch in range(2):\n"
        "    engine.train(trainLoaders, model, optimizer)\n"
    )
    view = ProjectView([str(main), str(engine)])
    options = MigrateOptions(project=view.facts_for(str(engine)))
    result = migrate_source(engine.read_text(), str(engine), options)
    assert "accel.backward(" in result.output
    found = [f for f in result.findings if f.code == "AM019"]
    assert [(f.line, f.status) for f in found] == [(5, "needs-review")]
    assert "this loop takes them from `trainLoaders[i]` (line 13)" in (found[0].message)


def test_a_helpers_wrapper_around_a_prepared_loader_is_not_reported(
    tmp_path: Path,
) -> None:
    """The reference scripts' ``metric_logger.log_every(data_loader, ...)``: a
    helper object's generator over a loader the file prepares yields its
    shares."""
    (tmp_path / "utils.py").write_text(
        "class MetricLogger:\n"
        "    def log_every(self, iterable, print_freq):\n"
        "        for i, obj in enumerate(iterable):\n"
        "            yield obj\n"
    )
    source = (
        "import torch\nimport torch.nn.functional as F\n"
        "from torch.utils.data import DataLoader, TensorDataset\n\nimport utils\n\n"
        "data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))\n"
        "data_loader = DataLoader(data, batch_size=4, shuffle=True)\n"
        "model = torch.nn.Linear(4, 1)\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "metric_logger = utils.MetricLogger()\n"
        "for x, y in metric_logger.log_every(data_loader, 2):\n"
        "    optimizer.zero_grad()\n"
        "    F.mse_loss(model(x), y).backward()\n"
        "    optimizer.step()\n"
    )
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    assert "accel.prepare_dataloader(DataLoader(" in result.output
    assert not [f for f in result.findings if f.code == "AM019"]


GWNET_UTIL = """\
import numpy as np


class DataLoader(object):
    def __init__(self, xs, ys, batch_size):
        self.xs, self.ys, self.batch_size = xs, ys, batch_size

    def shuffle(self):
        permutation = np.random.permutation(len(self.xs))
        self.xs, self.ys = self.xs[permutation], self.ys[permutation]

    def get_iterator(self):
        def _wrapper():
            for start in range(0, len(self.xs), self.batch_size):
                yield self.xs[start : start + self.batch_size], self.ys[start : start + self.batch_size]

        return _wrapper()


def load_dataset(batch_size):
    xs, ys = np.random.randn(16, 4), np.random.randn(16, 1)
    return {"train_loader": DataLoader(xs, ys, batch_size), "val_loader": DataLoader(xs, ys, batch_size)}
"""

GWNET_ENGINE = """\
import torch
import torch.nn.functional as F


class trainer:
    def __init__(self, lrate):
        self.model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lrate)

    def train(self, input, real_val):
        self.model.train()
        self.optimizer.zero_grad()
        loss = self._loss(input, real_val)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def _loss(self, input, real_val):
        return F.l1_loss(self.model(input), real_val)

    def eval(self, input, real_val):
        self.model.eval()
        return F.l1_loss(self.model(input), real_val).item()
"""

GWNET_MAIN = """\
import torch

import util
from engine import trainer

dataloader = util.load_dataset(8)
engine = trainer(0.01)
for i in range(2):
    dataloader["train_loader"].shuffle()
    for iter, (x, y) in enumerate(dataloader["train_loader"].get_iterator()):
        print("train", engine.train(torch.Tensor(x), torch.Tensor(y)))
    for iter, (x, y) in enumerate(dataloader["val_loader"].get_iterator()):
        print("valid", engine.eval(torch.Tensor(x), torch.Tensor(y)))
"""


def _gwnet(tmp_path: Path, main: str, batch: bool) -> list[Finding]:
    (tmp_path / "util.py").write_text(GWNET_UTIL)
    (tmp_path / "engine.py").write_text(GWNET_ENGINE)
    script = tmp_path / "main.py"
    script.write_text(main)
    files = [script, tmp_path / "engine.py", tmp_path / "util.py"]
    view = ProjectView([str(f) for f in (files if batch else files[:1])])
    options = MigrateOptions(project=view.facts_for(str(script)))
    result = migrate_source(main, str(script), options)
    return [f for f in result.findings if f.code == "AM019"]


def test_batch_mode_a_loop_driving_another_files_trainer_is_reported(
    tmp_path: Path,
) -> None:
    """Graph-WaveNet: main.py loops over ``dataloader["train_loader"]
    .get_iterator()`` (util.py's own loader class, out of the dict
    ``load_dataset`` returns) and hands each batch to ``engine.train``, the
    step of engine.py's ``trainer``, which builds its model and optimizer
    itself and is migrated with main.py. Before, nothing said that every
    process trains on every batch (gwnet_trainer_scaler_t17c_project_batch
    was SILENT: its BatchNorm's running variance differed). The validation
    loop, which calls ``engine.eval`` (no backward), is not a training loop."""
    (finding,) = _gwnet(tmp_path, GWNET_MAIN, batch=True)
    assert (finding.line, finding.status) == (10, "needs-review")
    assert (
        'this loop takes them from `dataloader["train_loader"].get_iterator()` '
        "(line 10)"
    ) in finding.message
    assert "running variance" in finding.message


def test_a_trainer_of_a_file_this_run_does_not_migrate_is_not_driven(
    tmp_path: Path,
) -> None:
    """With main.py alone, engine.py is read but not migrated: its trainer's
    step is no step of this run (AM004 leaves the file whole)."""
    assert _gwnet(tmp_path, GWNET_MAIN, batch=False) == []


def test_a_dict_item_this_file_writes_is_not_followed(tmp_path: Path) -> None:
    """``dataloader["train_loader"] = ...`` here: what the item holds is this
    file's, not followed (it may be a loader AM006 prepares)."""
    main = GWNET_MAIN.replace(
        "engine = trainer(0.01)\n",
        "engine = trainer(0.01)\n"
        'dataloader["train_loader"] = util.DataLoader(None, None, 8)\n',
    )
    assert _gwnet(tmp_path, main, batch=True) == []


def test_a_trainer_step_called_through_a_name_is_reported(tmp_path: Path) -> None:
    """rev17: ``train_step = engine.train`` then ``train_step(x, y)`` is the same
    step (without it the Graph-WaveNet SILENT came back: the BatchNorm's
    running variance differed by 2.3e-3 with no finding)."""
    main = GWNET_MAIN.replace(
        "engine = trainer(0.01)\n",
        "engine = trainer(0.01)\ntrain_step = engine.train\n",
    ).replace('print("train", engine.train(', 'print("train", train_step(')
    (finding,) = _gwnet(tmp_path, main, batch=True)
    assert finding.status == "needs-review"
    assert "get_iterator()" in finding.message


def test_a_loader_method_called_through_a_name_is_reported(tmp_path: Path) -> None:
    """rev17 (gw_loaderalias): ``train_iter = dataloader["train_loader"]
    .get_iterator`` bound once, then ``enumerate(train_iter())``: the batches
    come from the same generator method of util.py's loader object (before,
    the loop's source was not followed through the name and AM019 was
    dropped: gwnet_loader_alias_fx38b_project_batch SILENT, the BatchNorm's
    running variance differed)."""
    main = GWNET_MAIN.replace(
        "engine = trainer(0.01)\n",
        'engine = trainer(0.01)\ntrain_iter = dataloader["train_loader"].get_iterator\n',
    ).replace(
        'enumerate(dataloader["train_loader"].get_iterator()):\n        print("train"',
        'enumerate(train_iter()):\n        print("train"',
    )
    assert "train_iter()" in main
    (finding,) = _gwnet(tmp_path, main, batch=True)
    assert (finding.line, finding.status) == (11, "needs-review")
    assert "this loop takes them from `train_iter()` (line 11)" in finding.message


def test_a_name_bound_to_a_loader_method_is_not_reported(tmp_path: Path) -> None:
    """The same name bound to a torch DataLoader's ``__iter__``: batches of a
    loader (AM006 shards it where it is built), not an unsplit source."""
    main = (
        "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n\n"
        "from engine import trainer\n\n"
        "loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=8)\n"
        "engine = trainer(0.01)\ntrain_iter = loader.__iter__\n"
        "for i in range(2):\n"
        "    for x, y in train_iter():\n"
        '        print("train", engine.train(x, y))\n'
    )
    assert _gwnet(tmp_path, main, batch=True) == []
