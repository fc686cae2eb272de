"""The project view: facts of local imports, read (never run) from disk."""

from __future__ import annotations

import pickle
from pathlib import Path

from accel_migrate.cli.batch import migrate_file
from accel_migrate.cli.cache import ResultCache
from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

UTILS = """
import shutil
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.utils.data import DataLoader


def get_loader(ds):
    loader = DataLoader(ds, batch_size=4)
    return loader


def get_stream(ds):
    return DataLoader(ds, batch_size=None)


def get_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.1)


def loss_sum(a, b):
    return F.mse_loss(a, b, reduction="sum") + F.l1_loss(a, b, reduction="sum")


def loss_tokens(logits, y):
    return F.cross_entropy(logits, y, ignore_index=-1)


def loss_mixed(a, b):
    return F.mse_loss(a, b, reduction="sum") + F.l1_loss(a, b)


def save_checkpoint(state, is_best, filename="c.pth"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "best.pth")


def save_and_count(state, stats):
    torch.save(state, "x.pth")
    stats["saved"] += 1


def synced_save(state):
    dist.barrier()
    torch.save(state, "x.pth")


def show(msg):
    sys.stdout.write(msg)


class Logger:
    def __init__(self, path):
        self.f = open(path, "w")

    def log(self, text):
        print(text)
        self.f.write(text)
"""

MODELS_INIT = "from .factory import get_network\n"
FACTORY = """
def get_network(args):
    if args.net == "mlp":
        from models.mlp import mlp
        net = mlp()
    else:
        from .mlp import MLP
        net = MLP(3)
    if args.gpu:
        net = net.cuda()
    return net
"""
MLP = """
import torch.nn as nn


class Base(nn.Module):
    pass


class MLP(Base):
    def __init__(self, n):
        super().__init__()


def mlp():
    return MLP(2)
"""
TRAIN = """
import utils
from models import get_network
from utils import Logger as L
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text(MODELS_INIT)
    (tmp_path / "models" / "factory.py").write_text(FACTORY)
    (tmp_path / "models" / "mlp.py").write_text(MLP)
    train = tmp_path / "train.py"
    train.write_text(TRAIN)
    return train


def test_facts_of_local_modules(tmp_path: Path) -> None:
    facts = read_project(str(_project(tmp_path)))
    table = dict(facts.helpers)
    assert table["utils.get_loader"].returns == "loader"
    assert table["utils.get_loader"].unshardable == ""
    assert "batch_size=None" in table["utils.get_stream"].unshardable
    assert table["utils.get_optimizer"].returns == "optimizer"
    assert (table["utils.loss_sum"].returns, table["utils.loss_sum"].reduction) == (
        "loss",
        "sum",
    )
    assert table["utils.loss_tokens"].reduction == "token-mean"
    assert table["utils.loss_mixed"].reduction == "unknown"
    # a factory re-exported by a package, through absolute and relative imports
    network = table["models.get_network"]
    assert network.returns == "model" and network.file == "models/factory.py"
    assert (
        network.describe()
        == "`get_network` in models/factory.py returns a model (an nn.Module)"
    )
    save = table["utils.save_checkpoint"]
    assert save.writes == ("shutil.copyfile", "torch.save") and save.effects_only
    assert not table["utils.save_and_count"].effects_only  # it changes an argument
    synced = table["utils.synced_save"]
    assert synced.collectives and not synced.effects_only
    assert table["utils.show"].prints and table["utils.show"].effects_only
    logger = table["utils.Logger"]
    assert (
        logger.kind == "class"
        and logger.writes
        and logger.prints
        and logger.effects_only
    )
    assert facts.files == ("models/factory.py", "utils.py")
    assert pickle.loads(pickle.dumps(facts)) == facts


def test_single_file_reads_imports_and_writes_nothing(tmp_path: Path) -> None:
    train = _project(tmp_path)
    train.write_text(
        "import torch\nimport utils\nfrom models import get_network\n"
        "net = get_network(args)\nopt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "loader = utils.get_loader(ds)\n"
        "for x, y in loader:\n    opt.zero_grad()\n    net(x).sum().backward()\n"
        "    opt.step()\n"
        "utils.save_checkpoint(net.state_dict(), True)\n"
    )
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.py")}
    result = migrate_source(train.read_bytes(), str(train))
    out = result.output.decode()  # type: ignore[union-attr]
    assert "net = accel.prepare_model(get_network(args))" in out
    assert "loader = accel.prepare_dataloader(utils.get_loader(ds))" in out
    assert (
        "accel.on_main_process(utils.save_checkpoint, accel.state_dict(net), True)"
        in out
    )
    messages = [f.message for f in result.findings]
    assert any(
        m.startswith("`get_loader` in utils.py returns a DataLoader") for m in messages
    )
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.py")} == before
    # without the view (a string, no file) none of it is known
    assert b"prepare_dataloader" not in migrate_source(train.read_bytes()).output


def test_one_view_for_a_batch(tmp_path: Path) -> None:
    train = _project(tmp_path)
    view = ProjectView([str(train), str(tmp_path / "utils.py")])
    assert view.facts_for(str(train)) == read_project(str(train))
    assert not view.facts_for(str(tmp_path / "models" / "mlp.py"))


def test_cache_key_holds_the_imported_facts(tmp_path: Path) -> None:
    train = _project(tmp_path)
    train.write_text(
        "import torch\nimport utils\nnet = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "loader = utils.get_loader(ds)\n"
        "for x, y in loader:\n    opt.zero_grad()\n    net(x).sum().backward()\n"
        "    opt.step()\n"
    )
    cache = ResultCache.for_options(MigrateOptions(), tmp_path / "cache")

    def run() -> str:
        options = MigrateOptions(project=read_project(str(train)))
        outcome = migrate_file(str(train), str(train), options, cache)
        return outcome.output.decode()  # type: ignore[union-attr]

    assert "prepare_dataloader(utils.get_loader(ds))" in run()
    utils = tmp_path / "utils.py"
    utils.write_text(utils.read_text().replace("return loader", "return len(loader)"))
    assert "prepare_dataloader(utils.get_loader" not in run()


def test_sharded_loader_passed_to_a_helper_is_reported(tmp_path: Path) -> None:
    train = _project(tmp_path)
    (tmp_path / "utils.py").write_text(
        UTILS + "\n\ndef evaluate(net, loader):\n    for x, y in loader:\n"
        "        print(net(x).sum())\n"
    )
    train.write_text(
        "import torch\nimport utils\nnet = torch.nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "loader = utils.get_loader(ds)\n"
        "for x, y in loader:\n    opt.zero_grad()\n    net(x).sum().backward()\n"
        "    opt.step()\n"
        "utils.evaluate(net, loader)\n"
    )
    result = migrate_source(train.read_bytes(), str(train))
    review = [f for f in result.findings if f.status == "needs-review"]
    assert any(
        f.code == "AM006" and "passed to `evaluate` in utils.py" in f.message
        for f in review
    )
    # `evaluate` prints, and cannot be shown to do only that: left where it is
    assert b"on_main_process(utils.evaluate" not in result.output
