"""Scripts that train through a class of a local package they do not name as a
training class (the t9a trial of six real projects), each left whole with an
AM004 finding where it was skipped as "not a training entry point" with none
(SILENT in the soundness corpus):

- pytorch_tabnet's ``TabNetClassifier(TabModel)``: the base, in another file,
  builds its network and its optimizer from the class it is handed as a default
  (``optimizer_fn=torch.optim.Adam``) and calls backward (``inherited_trainers``,
  ``optimizer_defaults``);
- FeatureLearningRotNet's ``getattr(alg, config["algorithm_type"])(config)``:
  a class picked by name from the package ``algorithms``, whose classes call
  backward over what their base ``Algorithm`` builds; the package's
  ``from .Algorithm import Algorithm`` makes ``algorithms.Algorithm`` the class,
  not the submodule (``dynamic_trainers``, ``project_view``);
- deep-image-prior's ``optimize(OPTIMIZER, p, closure, LR, num_iter)``, which
  builds the optimizer over the parameters it is handed and steps it around the
  caller's closure (``closure_optimizers``).
"""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

BASE = """\
import torch


class TabModel:
    def __init__(self, lr=0.1, optimizer_fn=torch.optim.Adam):
        self.lr = lr
        self.optimizer_fn = optimizer_fn

    def fit(self, loader):
        self.network = torch.nn.Linear(4, 2)
        self._optimizer = self.optimizer_fn(self.network.parameters(), lr=self.lr)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(self.network(x), y)
            loss.backward()
            self._optimizer.step()
"""

CLASSIFIER = """\
from pkg.abstract_model import TabModel


class TabNetClassifier(TabModel):
    def predict(self, x):
        return self.network(x).argmax(1)
"""

TAB_SCRIPT = """\
import torch
from pkg.tab_model import TabNetClassifier

clf = TabNetClassifier(lr=0.02)
clf.fit(loader)
print("test acc", (clf.predict(x) == y).float().mean().item())
torch.save(clf.network.state_dict(), "net.pt")
"""


def _tabnet(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "abstract_model.py").write_text(BASE)
    (tmp_path / "pkg" / "tab_model.py").write_text(CLASSIFIER)
    script = tmp_path / "main.py"
    script.write_text(TAB_SCRIPT)
    return script


def test_a_class_trains_through_its_base_and_an_optimizer_handed_as_a_default(
    tmp_path: Path,
) -> None:
    script = _tabnet(tmp_path)
    table = dict(read_project(str(script)).helpers)
    fact = table["pkg.tab_model.TabNetClassifier"]
    assert fact.trains_own == (
        "its base `TabModel` in pkg/abstract_model.py: `fit` calls backward "
        "(line 14), and `fit` builds an optimizer (`self.optimizer_fn(...)`, line 11)"
    )
    assert fact.trains_in == "pkg/abstract_model.py"
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 4
    assert "In pkg/abstract_model.py wrap each model it builds" in blocking.message


def test_an_attribute_that_is_no_optimizer_class_builds_none(tmp_path: Path) -> None:
    script = _tabnet(tmp_path)
    (tmp_path / "pkg" / "abstract_model.py").write_text(
        BASE.replace("optimizer_fn=torch.optim.Adam", "optimizer_fn=make_optimizer")
    )
    table = dict(read_project(str(script)).helpers)
    assert table["pkg.tab_model.TabNetClassifier"].trains_own == ""


ALGORITHM = """\
import torch


class Algorithm:
    def __init__(self, opt):
        self.networks = {"model": torch.nn.Linear(4, 2)}

    def init_optimizer(self, net):
        return torch.optim.SGD(net.parameters(), lr=0.1)

    def solve(self, loader):
        self.optimizers = {"model": self.init_optimizer(self.networks["model"])}
        for batch in loader():
            self.train_step(batch)
"""

CLASSIFICATION = """\
from . import Algorithm


class ClassificationModel(Algorithm):
    def train_step(self, batch):
        loss = self.networks["model"](batch[0]).sum()
        loss.backward()
        self.optimizers["model"].step()
"""

ROT_SCRIPT = """\
import algorithms as alg
from dataloader import DataLoader

config = {"algorithm_type": "ClassificationModel"}
loader = DataLoader()
algorithm = getattr(alg, config["algorithm_type"])(config)
algorithm.solve(loader)
print("done")
"""


def _rotnet(tmp_path: Path) -> Path:
    package = tmp_path / "algorithms"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from .Algorithm import Algorithm\n"
        "from .ClassificationModel import ClassificationModel\n"
    )
    (package / "Algorithm.py").write_text(ALGORITHM)
    (package / "ClassificationModel.py").write_text(CLASSIFICATION)
    (tmp_path / "dataloader.py").write_text(
        "import torch\n\n\nclass DataLoader:\n    def __call__(self):\n"
        "        return torch.utils.data.DataLoader(range(8), batch_size=2)\n"
    )
    script = tmp_path / "main.py"
    script.write_text(ROT_SCRIPT)
    return script


def test_a_package_reexport_is_the_class_not_the_submodule(tmp_path: Path) -> None:
    script = _rotnet(tmp_path)
    table = dict(read_project(str(script)).helpers)
    fact = table["algorithms.ClassificationModel"]
    # `from . import Algorithm` is the class __init__.py re-exports
    assert fact.trains_own == (
        "`train_step` calls backward (line 7), and its base `Algorithm` in "
        "algorithms/Algorithm.py: `init_optimizer` builds an optimizer "
        "(`torch.optim.SGD(...)`, line 9)"
    )
    assert fact.trains_in == "algorithms/Algorithm.py"


def test_a_trainer_class_picked_by_name_leaves_the_script_whole(
    tmp_path: Path,
) -> None:
    script = _rotnet(tmp_path)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 6
    assert blocking.message.startswith(
        '`getattr(alg, config["algorithm_type"])(config)` builds a class of the '
        "local module `algorithms` picked by name, and its classes train: "
        "`ClassificationModel` in algorithms/ClassificationModel.py"
    )
    assert (
        "algorithms/Algorithm.py, algorithms/ClassificationModel.py are not migrated"
        in blocking.message
    )


def test_getattr_of_a_module_without_trainers_blocks_nothing(tmp_path: Path) -> None:
    script = _rotnet(tmp_path)
    (tmp_path / "algorithms" / "ClassificationModel.py").write_text(
        CLASSIFICATION.replace("loss.backward()", "pass")
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not any(f.code == "AM004" for f in result.findings)


UTILS = """\
import torch


def optimize(optimizer_type, parameters, closure, LR, num_iter):
    optimizer = torch.optim.Adam(parameters, lr=LR)
    for j in range(num_iter):
        optimizer.zero_grad()
        closure()
        optimizer.step()
"""

DIP_SCRIPT = """\
import torch
from utils import optimize

net = torch.nn.Linear(4, 4)
x = torch.randn(1, 4)


def closure():
    loss = (net(x) - x).pow(2).mean()
    loss.backward()
    print("loss", loss.item())
    return loss


optimize("adam", list(net.parameters()), closure, 0.01, 10)
torch.save(net.state_dict(), "net.pt")
"""


def test_a_helper_that_steps_an_optimizer_around_the_closure(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    script = tmp_path / "main.py"
    script.write_text(DIP_SCRIPT)
    fact = dict(read_project(str(script)).helpers)["utils.optimize"]
    assert fact.trains == (
        "`optimize` builds an optimizer over its parameter `parameters` "
        "(`torch.optim.Adam(...)`, line 5) and steps it (line 9) around its "
        "parameter `closure` (line 8), the caller's closure that runs the backward"
    )
    assert fact.trained_parameter == ("parameters", 1)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 15
    # before: "not a training entry point", no finding
    (tmp_path / "utils.py").write_text(UTILS.replace("        closure()\n", ""))
    fact = dict(read_project(str(script)).helpers)["utils.optimize"]
    assert fact.trains == ""


NCF_ENGINE = """\
import torch


class Engine(object):
    def __init__(self, config):
        self.opt = torch.optim.Adam(self.model.parameters(), lr=config["lr"])

    def train_single_batch(self, users, ratings):
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(users), ratings)
        loss.backward()
        self.opt.step()
"""

NCF_NEUMF = """\
import torch

from engine import Engine


class NeuMFEngine(Engine):
    def __init__(self, config):
        self.model = torch.nn.Linear(4, 1)
        super(NeuMFEngine, self).__init__(config)
"""

NCF_SCRIPT = """\
import torch
from neumf import NeuMFEngine

engine = NeuMFEngine({"lr": 0.1})
for step in range(3):
    engine.train_single_batch(torch.randn(8, 4), torch.randn(8, 1))
"""


def test_a_subclass_that_sets_the_model_is_named_where_it_builds_it(
    tmp_path: Path,
) -> None:
    """yihong-chen's NCF: ``NeuMFEngine.__init__`` sets ``self.model`` in
    neumf.py, and its base ``Engine`` in engine.py builds the optimizer over it
    and calls backward. AM004 said the models were built "in engine.py" and
    to wrap them there, where no model is built; it names both files now."""
    (tmp_path / "engine.py").write_text(NCF_ENGINE)
    (tmp_path / "neumf.py").write_text(NCF_NEUMF)
    script = tmp_path / "main.py"
    script.write_text(NCF_SCRIPT)
    fact = dict(read_project(str(script)).helpers)["neumf.NeuMFEngine"]
    assert (fact.trains_in, fact.own_builds) == ("engine.py", ("model",))
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert (
        "built inside it, in neumf.py (where the class sets `self.model`) and "
        "engine.py (its base's)"
    ) in blocking.message
    assert "In those files wrap each model it builds" in blocking.message


def test_a_subclass_that_sets_nothing_is_trained_in_its_bases_file(
    tmp_path: Path,
) -> None:
    """pytorch_tabnet's ``TabNetClassifier`` only adds ``predict``: its
    network and optimizer are its base's, in abstract_model.py alone."""
    script = _tabnet(tmp_path)
    fact = dict(read_project(str(script)).helpers)["pkg.tab_model.TabNetClassifier"]
    assert fact.own_builds == ()
