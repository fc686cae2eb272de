"""A library trainer class (minGPT's ``Trainer(config, model, dataset)``) that
trains the model its caller hands it: the caller's file is left whole
(``library_trainers``, AM004), as the library's is."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

TRAINER = """\
import torch
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, config, model, dataset):
        self.config = config
        self.model = model
        self.dataset = dataset

    def run(self):
        model, config = self.model, self.config
        optimizer = model.configure_optimizers(config)
        loader = DataLoader(self.dataset, batch_size=8)
        model.train()
        for x, y in loader:
            logits, self.loss = model(x, y)
            model.zero_grad()
            self.loss.backward()
            optimizer.step()


class OwnModel:
    def __init__(self, loader):
        self.loader = loader
        self.model = torch.nn.Linear(2, 2)

    def run(self):
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for x, y in self.loader:
            self.model(x).sum().backward()
            opt.step()


class HandedOptimizer:
    def __init__(self, optimizer):
        self.optimizer = optimizer

    def step(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


class Evaluator:
    def __init__(self, model):
        self.model = model

    def score(self, x):
        return self.model(x)
"""

SCRIPT = """\
import torch
from torch.utils.data import DataLoader

from trainer import Trainer

model = torch.nn.Linear(4, 4)
trainer = Trainer(config, model, train_set)
trainer.run()
correct = 0
for x, y in DataLoader(test_set, batch_size=16):
    correct += (model(x).argmax(1) == y).sum().item()
print(f"train loss {trainer.loss.item():.4f} correct {correct}")
torch.save(model.state_dict(), "model.pt")
"""


def _project(tmp_path: Path, trainer: str = TRAINER) -> Path:
    (tmp_path / "trainer.py").write_text(trainer)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    return script


def test_a_class_that_trains_what_it_is_handed(tmp_path: Path) -> None:
    _project(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text("import trainer\n")  # every name of the module
    table = dict(read_project(str(probe)).helpers)
    assert table["trainer.Trainer"].trains == (
        "`run` calls backward (line 19) in a step that runs `self.model`, which it "
        "is handed (`__init__`'s `model`)"
    )
    # it builds its own model (migrated in its own file); an optimizer handed in
    # is no model; a class with no backward trains nothing
    assert table["trainer.OwnModel"].trains == ""
    assert table["trainer.HandedOptimizer"].trains == ""
    assert table["trainer.Evaluator"].trains == ""


def test_the_caller_is_left_whole_naming_the_library(tmp_path: Path) -> None:
    script = _project(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.py")}
    result = migrate_source(script.read_bytes(), str(script))
    # on the previous code the eval loader was sharded, `correct` reduced and the
    # print and save moved to the main process, while each process trained a
    # full copy in trainer.py
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert len(blocking) == 1 and blocking[0].status == "needs-review"
    assert blocking[0].line == 7
    message = blocking[0].message
    assert message.startswith(
        "`Trainer(config, model, train_set)` hands its arguments to `Trainer` in "
        "trainer.py, which trains with them there: `run` calls backward (line 19)"
    )
    assert "Nothing in this file was migrated" in message
    assert {p: p.read_bytes() for p in tmp_path.rglob("*.py")} == before


def test_a_library_already_on_the_runtime_does_not_block(tmp_path: Path) -> None:
    migrated = TRAINER.replace(
        "import torch\n", "import torch\nimport accel_migrate.runtime as accel\n"
    ).replace("self.loss.backward()", "accel.backward(self.loss); self.loss.backward")
    script = _project(tmp_path, migrated)
    fact = dict(read_project(str(script)).helpers)["trainer.Trainer"]
    assert fact.trains and fact.collectives
    result = migrate_source(script.read_bytes(), str(script))
    assert not any("hands its arguments" in f.message for f in result.findings)


OWN_SCRIPT = """\
import torch
from torch.utils.data import DataLoader

from trainer import OwnModel

loader = DataLoader(train_set, batch_size=8, shuffle=True)
runner = OwnModel(loader)
runner.run()
print("done")
"""


def test_a_class_that_trains_models_of_its_own(tmp_path: Path) -> None:
    _project(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text("import trainer\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["trainer.OwnModel"].trains_own == (
        "`run` calls backward (line 31), and `run` builds an optimizer "
        "(`torch.optim.SGD(...)`, line 29)"
    )
    # an optimizer from the model's own method, one handed in, or none: not built
    for name in ("Trainer", "HandedOptimizer", "Evaluator"):
        assert table[f"trainer.{name}"].trains_own == ""


def test_its_caller_is_left_whole_when_the_class_is_not_migrated(
    tmp_path: Path,
) -> None:
    _project(tmp_path)
    script = tmp_path / "own.py"
    script.write_text(OWN_SCRIPT)
    result = migrate_source(script.read_bytes(), str(script))
    # on the previous code the loader was sharded and the print moved to the main
    # process while each process trained OwnModel's unprepared model on its share
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 7
    assert blocking.message.startswith(
        "`OwnModel(loader)` builds `OwnModel` in trainer.py, which trains models of "
        "its own there: `run` calls backward (line 31)"
    )


ALIASED_SCRIPT = """\
from trainer import OwnModel

Exp = OwnModel
for ii in range(2):
    exp = Exp(None)
    exp.run()
"""


def test_a_class_called_through_a_name_bound_to_it(tmp_path: Path) -> None:
    """Informer2020's main: ``Exp = Exp_Informer`` then ``exp = Exp(args)``;
    ``exp.train(setting)``. The script has no loop, loader or optimizer of its
    own: before, it was skipped as no training entry point, with no finding,
    while each process trained a full copy in exp/."""
    _project(tmp_path)
    script = tmp_path / "aliased.py"
    script.write_text(ALIASED_SCRIPT)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed and result.skip_reason is None
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 5
    assert blocking.message.startswith(
        "`Exp(None)` builds `OwnModel` in trainer.py, which trains models of its own"
    )
    # a name bound twice is not taken for either class
    script.write_text(
        ALIASED_SCRIPT.replace("Exp = OwnModel\n", "Exp = OwnModel\nExp = dict\n")
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not [f for f in result.findings if f.code == "AM004"]


def test_a_batch_that_migrates_the_class_migrates_its_caller(tmp_path: Path) -> None:
    """In one run over both files the class's file prepares its own models, so
    the caller shards its loader (a second run changes neither: golden project
    fixtures/projects/pix2pix)."""
    _project(tmp_path)
    script = tmp_path / "own.py"
    script.write_text(OWN_SCRIPT)
    view = ProjectView([str(script), str(tmp_path / "trainer.py")])
    facts = view.facts_for(str(script))
    assert dict(facts.helpers)["trainer.OwnModel"].trains_own == ""
    result = migrate_source(
        script.read_bytes(), str(script), MigrateOptions(project=facts)
    )
    assert result.changed
    assert b"accel.prepare_dataloader(DataLoader(" in result.output  # type: ignore[operator]


BASES = """\
class BaseTrainer:
    def __init__(self, model, criterion, optimizer, config):
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
"""

SUBCLASS = """\
from base import BaseTrainer


class Trainer(BaseTrainer):
    def __init__(self, model, criterion, optimizer, config, data_loader):
        super().__init__(model, criterion, optimizer, config)
        self.data_loader = data_loader

    def _train_epoch(self, epoch):
        for x, y in self.data_loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()


class Explicit(BaseTrainer):
    def __init__(self, net, loader):
        BaseTrainer.__init__(self, net, None, None, config=None)
        self.loader = loader

    def fit(self):
        self.model.train()
        for x, y in self.loader:
            self.model(x).sum().backward()


class Inherited(Trainer):
    pass
"""


def test_a_subclass_trains_what_its_base_stores(tmp_path: Path) -> None:
    """pytorch-template's ``Trainer(BaseTrainer)``: ``super().__init__(model,
    ...)`` hands the model to the base, which stores it; the subclass's step
    backpropagates through ``self.model`` (named, not ``self.criterion``)."""
    (tmp_path / "base.py").write_text(BASES)
    (tmp_path / "trainer.py").write_text(SUBCLASS)
    probe = tmp_path / "probe.py"
    probe.write_text("import trainer\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["trainer.Trainer"].trains == (
        "`_train_epoch` calls backward (line 13) in a step that runs `self.model`, "
        "which it is handed (`__init__`'s `model`)"
    )
    assert table["trainer.Trainer"].trained_parameter == ("model", 0)
    assert "runs `self.model`" in table["trainer.Explicit"].trains
    assert table["trainer.Explicit"].trained_parameter == ("net", 0)
    # no __init__ of its own: the inherited one's parameters
    assert table["trainer.Inherited"].trained_parameter == ("model", 0)


LOOP = """\
def fit(model, optimizer, loader, epochs):
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            loss = model.training_step((x, y))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"loss {loss.item():.4f}")


def evaluate(model, loader):
    return sum(model(x).sum().item() for x, _ in loader)
"""


def test_a_function_that_trains_what_it_is_handed_leaves_its_caller_whole(
    tmp_path: Path,
) -> None:
    """A Lightning-style project's own ``fit(model, optimizer, loader)`` in
    loop.py: in file mode loop.py is not rewritten, so the script that builds
    the model is not migrated either (its loaders were sharded and its model
    prepared while the loop stayed unmigrated)."""
    (tmp_path / "loop.py").write_text(LOOP)
    script = tmp_path / "main.py"
    script.write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from loop import fit, evaluate\n\n"
        "model = torch.nn.Linear(4, 4)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loader = DataLoader(train_set, batch_size=8)\n"
        "fit(model, opt, loader, 2)\n"
        "print(evaluate(model, DataLoader(test_set, batch_size=8)))\n"
    )
    table = dict(read_project(str(script)).helpers)
    assert table["loop.fit"].trains == (
        "`fit` calls backward (line 7) in a step that runs `model`, its parameter"
    )
    assert table["loop.evaluate"].trains == ""
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [f.line for f in blocking] == [8]
    assert blocking[0].message.startswith(
        "`fit(model, opt, loader, 2)` hands its arguments to `fit` in loop.py, "
        "which trains with them there"
    )


ENGINE = """\
import torch


def train(model, loaders, cfg):
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr)
    for epoch in range(cfg.epochs):
        train_one_epoch(model=model, loader=loaders["train"], optimizer=optimizer)


def train_one_epoch(model, loader, optimizer):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()


def passes_a_copy(net, loaders, cfg):
    train_one_epoch(model=make_copy(net), loader=loaders["train"], optimizer=None)
"""

KWARG_SCRIPT = """\
import torch
from torch.utils.data import DataLoader

from engine import train

model = torch.nn.Linear(4, 4)
tl = DataLoader(train_set, batch_size=8, shuffle=True)
train(model=model, loaders={"train": tl}, cfg=cfg)
torch.save(model.state_dict(), "model.pt")
"""


def test_a_function_trains_what_it_hands_a_function_of_its_module(
    tmp_path: Path,
) -> None:
    """``train(model, loaders, cfg)`` builds the optimizer and hands the model on
    by keyword to ``train_one_epoch``, which runs the backward: ``train`` trains
    its ``model`` (a model handed through something else is not followed)."""
    (tmp_path / "engine.py").write_text(ENGINE)
    probe = tmp_path / "probe.py"
    probe.write_text("import engine\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["engine.train"].trains == (
        "`train` hands its parameter `model` to `train_one_epoch` (line 7), where "
        "`train_one_epoch` calls backward (line 14) in a step that runs `model`, "
        "its parameter"
    )
    assert table["engine.train"].trained_parameter == ("model", 0)
    assert table["engine.train_one_epoch"].trained_parameter == ("model", 0)
    assert table["engine.passes_a_copy"].trains == ""


def test_a_script_with_no_loop_that_hands_its_model_to_such_a_function(
    tmp_path: Path,
) -> None:
    """File mode: the script has no loop and no optimizer of its own (it was
    skipped as no training entry point, with no finding, and left unmigrated
    while the user was told nothing): it is left whole, naming engine.py."""
    (tmp_path / "engine.py").write_text(ENGINE)
    script = tmp_path / "main.py"
    script.write_text(KWARG_SCRIPT)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [f.line for f in blocking] == [8]
    assert "hands its arguments to `train` in engine.py" in blocking[0].message


def test_a_batch_caller_prepares_the_model_the_function_builds_its_optimizer_over(
    tmp_path: Path,
) -> None:
    """Batch mode: engine.py counts on its callers to prepare the models they
    hand it, and its ``train`` builds the optimizer over the ``model`` it is
    handed (``HelperFact.optimized_parameters``, read for functions since round
    r34b: pytorch-adda's ``train_src``). The script prepares the model it hands
    (it was left whole, with AM004 saying no optimizer of this file receives
    its parameters)."""
    (tmp_path / "engine.py").write_text(ENGINE)
    script = tmp_path / "main.py"
    script.write_text(KWARG_SCRIPT)
    view = ProjectView([str(script), str(tmp_path / "engine.py")])
    facts = view.facts_for(str(script))
    fact = dict(facts.helpers)["engine.train"]
    assert fact.batch_migrated
    assert fact.optimized_parameters == (("model", 0),)
    result = migrate_source(
        script.read_bytes(), str(script), MigrateOptions(project=facts)
    )
    output = result.output.decode()  # type: ignore[union-attr]
    assert "model = accel.prepare_model(torch.nn.Linear(4, 4))" in output
    assert not [
        f for f in result.findings if f.code == "AM004" and f.status == "needs-review"
    ]


OWNING_BASE = """\
import torch


class BaseTrainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train(self):
        for epoch in range(2):
            self._train_epoch(epoch)
        torch.save(self.model.state_dict(), "last.pt")


class Logging:
    def log(self, text):
        print(text)
"""

SUBCLASS_SCRIPT = """\
import torch
from torch.utils.data import DataLoader

from base import BaseTrainer, Logging


class ClsTrainer(BaseTrainer):
    def _train_epoch(self, epoch):
        for x, y in self.loader:
            self.optimizer.zero_grad()
            torch.nn.functional.cross_entropy(self.model(x), y).backward()
            self.optimizer.step()


model = torch.nn.Linear(4, 3)
loader = DataLoader(train_set, batch_size=8, shuffle=True)
ClsTrainer(model, loader).train()
"""


def test_a_subclass_over_a_base_that_builds_the_optimizer(tmp_path: Path) -> None:
    """``class ClsTrainer(BaseTrainer)`` in the script writes the step; the base
    in base.py builds the optimizer over the model it is handed and runs the
    loop. The script was migrated (loader sharded, backward rewritten) while the
    model stayed unprepared: now it is left whole, naming the base's file."""
    (tmp_path / "base.py").write_text(OWNING_BASE)
    script = tmp_path / "main.py"
    script.write_text(SUBCLASS_SCRIPT)
    table = dict(read_project(str(script)).helpers)
    assert table["base.BaseTrainer"].builds_optimizer == (
        "`__init__` builds an optimizer (`torch.optim.SGD(...)`, line 8)"
    )
    assert table["base.Logging"].builds_optimizer == ""
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [f.line for f in blocking] == [7]
    assert blocking[0].message.startswith(
        "`ClsTrainer` (line 7) runs a backward in its methods, and its base "
        "`BaseTrainer` in base.py sets up the training: `__init__` builds an "
        "optimizer (`torch.optim.SGD(...)`, line 8)"
    )


def test_a_subclass_of_a_base_that_builds_no_optimizer_is_migrated(
    tmp_path: Path,
) -> None:
    """A mixin base of another file (``Logging``) sets up nothing of training:
    the script's own model and optimizer are migrated as before."""
    (tmp_path / "base.py").write_text(OWNING_BASE)
    script = tmp_path / "main.py"
    script.write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from base import Logging\n\n\n"
        "class Loop(Logging):\n"
        "    def run(self, model, opt, loader):\n"
        "        for x, y in loader:\n"
        "            opt.zero_grad()\n"
        "            model(x).sum().backward()\n"
        "            opt.step()\n\n\n"
        "model = torch.nn.Linear(4, 3)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "Loop().run(model, opt, DataLoader(train_set, batch_size=8))\n"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert result.changed
    assert b"accel.prepare_model(" in result.output  # type: ignore[operator]


def test_a_subclass_over_two_bases_of_other_files(tmp_path: Path) -> None:
    """``Mine(Trainer)`` in the script, ``Trainer(BaseTrainer)`` in trainer.py
    adding only a method, and the optimizer built in base.py (in a method of its
    own, ``_make_optimizer``): the fact is read through the bases' modules."""
    (tmp_path / "base.py").write_text(
        "import torch\n\n\n"
        "class BaseTrainer:\n"
        "    def __init__(self, model, loader):\n"
        "        self.model, self.loader = model, loader\n"
        "        self.optimizer = self._make_optimizer()\n\n"
        "    def _make_optimizer(self):\n"
        "        return torch.optim.Adam(self.model.parameters(), lr=1e-3)\n"
    )
    (tmp_path / "trainer.py").write_text(
        "from base import BaseTrainer\n\n\n"
        "class Trainer(BaseTrainer):\n"
        "    def log(self, text):\n"
        "        print(text)\n"
    )
    script = tmp_path / "main.py"
    script.write_text(
        SUBCLASS_SCRIPT.replace(
            "from base import BaseTrainer, Logging", "from trainer import Trainer"
        ).replace("ClsTrainer(BaseTrainer)", "ClsTrainer(Trainer)")
    )
    table = dict(read_project(str(script)).helpers)
    assert table["trainer.Trainer"].builds_optimizer == (
        "its base `BaseTrainer` in base.py: `_make_optimizer` builds an optimizer "
        "(`torch.optim.Adam(...)`, line 10)"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    assert [f.line for f in result.findings if f.code == "AM004"] == [7]


LOOP_BASE = """\
import torch


class BaseTrainer:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def fit(self):
        self.model.train()
        for batch in self.loader:
            self.optimizer.zero_grad()
            loss = self.training_step(batch)
            loss.backward()
            self.optimizer.step()
"""


def test_a_subclass_that_writes_only_the_training_step(tmp_path: Path) -> None:
    """``class Lit(BaseTrainer)`` in the script writes ``training_step``; the
    base's ``fit`` runs the backward through the model it is handed. The script
    had its loaders sharded and its metrics reduced while each process trained a
    full copy in the base (no backward in the script: nothing at run time said
    so); now it is left whole, naming the base's loop."""
    (tmp_path / "base.py").write_text(LOOP_BASE)
    script = tmp_path / "main.py"
    script.write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "from base import BaseTrainer\n\n\n"
        "class Lit(BaseTrainer):\n"
        "    def training_step(self, batch):\n"
        "        x, y = batch\n"
        "        return torch.nn.functional.cross_entropy(self.model(x), y)\n\n\n"
        "model = torch.nn.Linear(4, 3)\n"
        "Lit(model, DataLoader(train_set, batch_size=8, shuffle=True)).fit()\n"
        "print(sum((model(x).argmax(1) == y).sum().item()\n"
        "          for x, y in DataLoader(test_set, batch_size=8)))\n"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [f.line for f in blocking] == [6]
    assert blocking[0].message.startswith(
        "`Lit` (line 6) inherits the training of its base `BaseTrainer` in base.py: "
        "`fit` calls backward (line 15)"
    )


STEP_BASE = """\
import torch


class Trainer:
    def __init__(self, model, optimizer, get_batch):
        self.model = model
        self.optimizer = optimizer
        self.get_batch = get_batch

    def train_iteration(self, num_steps):
        self.model.train()
        for _ in range(num_steps):
            loss = self.train_step()
            print(loss)

    def train_step(self):
        x, y = self.get_batch()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()
"""


def test_a_subclass_that_overrides_the_step_inherits_the_loop(tmp_path: Path) -> None:
    """``class SequenceTrainer(Trainer)`` (decision-transformer's
    seq_trainer.py) overrides ``train_step``, the step whose backward the base
    trains with: the finding said it "inherits the training of its base ...
    `train_step` calls backward", which is false of the subclass; what it
    inherits is ``train_iteration``, the loop that calls its own step."""
    (tmp_path / "trainer.py").write_text(STEP_BASE)
    script = tmp_path / "seq_trainer.py"
    script.write_text(
        "import torch\n"
        "from trainer import Trainer\n\n\n"
        "class SequenceTrainer(Trainer):\n"
        "    def train_step(self):\n"
        "        x, y = self.get_batch()\n"
        "        loss = torch.nn.functional.l1_loss(self.model(x), y)\n"
        "        self.optimizer.zero_grad()\n"
        "        loss.backward()\n"
        "        self.optimizer.step()\n"
        "        return loss.item()\n"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [f.line for f in blocking] == [5]
    assert blocking[0].message.startswith(
        "`SequenceTrainer` (line 5) overrides `train_step` (line 6), the step its "
        "base trains with, and inherits `train_iteration` of its base `Trainer` "
        "in trainer.py, the loop that calls `self.train_step()` (line 13) there"
    )
    assert "inherits the training" not in blocking[0].message


TRAIN_FNS = """\
import torch


def GAN_training_function(G, D, GD, z_, config):
    def train(x, y):
        D.optim.zero_grad()
        z_.sample_()
        D_fake, D_real = GD(z_, x, train_G=False)
        loss = torch.relu(1.0 + D_fake).mean() + torch.relu(1.0 - D_real).mean()
        loss.backward()
        D.optim.step()
        return {"D_loss": float(loss.item())}

    return train


def shadowing_factory(GD, config):
    def train(GD, x):
        GD(x).sum().backward()

    return train


def unreturned_factory(GD, config):
    def train(x):
        GD(x).sum().backward()

    return config
"""

CLOSURE_SCRIPT = """\
import torch

import train_fns
from models import G_D

GD = G_D()
train = train_fns.GAN_training_function(GD.G, GD.D, GD, z_, config)
for x, y in loader:
    metrics = train(x, y)
    print(metrics["D_loss"])
"""


def test_a_factory_that_returns_its_training_step_as_a_closure(
    tmp_path: Path,
) -> None:
    """BigGAN-PyTorch's ``train_fns.GAN_training_function(G, D, GD, ...)``
    defines ``train(x, y)`` inside itself (the backward and the optimizer steps
    are there) and returns it: it trains the ``GD`` it is handed. The script,
    with no backward, optimizer or DataLoader of its own, was skipped as no
    training entry point with no finding before; it is left whole, naming
    train_fns.py. A closure whose own parameter shadows the factory's, or one
    the factory does not return, trains nothing handed."""
    (tmp_path / "train_fns.py").write_text(TRAIN_FNS)
    script = tmp_path / "main.py"
    script.write_text(CLOSURE_SCRIPT)
    table = dict(read_project(str(script)).helpers)
    assert table["train_fns.GAN_training_function"].trains == (
        "`GAN_training_function` returns `train` (line 14), a step that calls "
        "backward (line 10) and runs `GD`, its parameter"
    )
    assert table["train_fns.GAN_training_function"].trained_parameter == ("GD", 2)
    assert table["train_fns.shadowing_factory"].trains == ""
    assert table["train_fns.unreturned_factory"].trains == ""
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert [f.line for f in blocking] == [7]
    assert "hands its arguments to `GAN_training_function` in train_fns.py" in (
        blocking[0].message
    )


FACTORY = """\
import torch.optim as optim


def get_optimizer(config, parameters):
    if config.optimizer == "Adam":
        return optim.Adam(parameters, lr=config.lr)
    elif config.optimizer == "SGD":
        return optim.SGD(parameters, lr=config.lr, momentum=0.9)
    raise NotImplementedError(config.optimizer)
"""

RUNNER = """\
import torch

from functions import get_optimizer


class Diffusion(object):
    def __init__(self, config):
        self.config = config

    def train(self, loader):
        model = torch.nn.Linear(2, 2)
        optimizer = get_optimizer(self.config, model.parameters())
        for x in loader:
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
"""


def test_an_optimizer_from_a_project_function_counts_as_built(tmp_path: Path) -> None:
    # ermongroup/ddim: runners/diffusion.py's Diffusion.train() builds its model
    # and gets its optimizer from functions/__init__.py's get_optimizer(config,
    # params). main.py, with no loop of its own, was skipped as "not a training
    # entry point" with nothing said; it is left whole now, AM004 naming the runner.
    (tmp_path / "functions.py").write_text(FACTORY)
    (tmp_path / "runner.py").write_text(RUNNER)
    probe = tmp_path / "probe.py"
    probe.write_text("import runner\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["runner.Diffusion"].trains_own == (
        "`train` calls backward (line 15), and `train` builds an optimizer "
        "(`get_optimizer(...)`, line 12)"
    )
    script = tmp_path / "main.py"
    script.write_text(
        "from runner import Diffusion\n\nrunner = Diffusion(None)\nrunner.train([])\n"
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed and result.skip_reason is None
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.message.startswith(
        "`Diffusion(None)` builds `Diffusion` in runner.py, which trains models of "
        "its own there: `train` calls backward (line 15)"
    )


FIT_TRAINER = """\
class Trainer(object):
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, model, train_dataloader):
        optimizers = model.configure_optimizers()
        optimizer = optimizers[0]
        for epoch in range(self.max_epochs):
            model.train()
            for batch_idx, batch in enumerate(train_dataloader):
                loss = model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


class OwnStep(object):
    def step(self, x):
        loss = self(x).sum()
        loss.backward()
"""

FIT_SCRIPT = """\
import torch
from torch.utils.data import DataLoader
from trainer import Trainer


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)

    def configure_optimizers(self):
        return [torch.optim.SGD(self.parameters(), lr=0.1)]

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self(x), y)


loader = DataLoader(list(zip(torch.randn(8, 2), torch.zeros(8).long())), batch_size=4)
net = Net()
trainer = Trainer(max_epochs=2)
trainer.fit(model=net, train_dataloader=loader)
torch.save(net.state_dict(), "net.pth")
"""


def test_a_class_whose_method_trains_what_it_is_handed(tmp_path: Path) -> None:
    """A hand-written Lightning-style ``Trainer`` whose ``fit(model, loader)``
    runs the backward: the file that builds it is left whole (t12c: ViT-CIFAR's
    main.py was migrated, its loaders sharded and its model prepared, while the
    backward in trainer.py stayed plain; only the runtime's UnsyncedGradientsError
    caught it)."""
    (tmp_path / "trainer.py").write_text(FIT_TRAINER)
    script = tmp_path / "main.py"
    script.write_text(FIT_SCRIPT)
    probe = tmp_path / "probe.py"
    probe.write_text("import trainer\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["trainer.Trainer"].trains == ""
    assert table["trainer.Trainer"].method_trains == (
        "`fit` calls backward (line 13) in a step that runs `model`, its parameter"
    )
    # a step of the instance itself (`self(x)`) trains no handed model
    assert table["trainer.OwnStep"].method_trains == ""
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    blocking = [f for f in result.findings if f.code == "AM004"]
    assert len(blocking) == 1 and blocking[0].status == "needs-review"
    assert blocking[0].line == 24
    assert blocking[0].message.startswith(
        "`Trainer(max_epochs=2)` builds `Trainer` in trainer.py, whose method "
        "trains the model a caller hands it there: `fit` calls backward (line 13)"
    )


TOOLKIT = """\
import torch


class Toolkit:
    def __init__(self, lr=0.01):
        self.lr = lr

    def finetune(self, model, opt, loader):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    def tune_all(self, model, opt, loader):
        self.finetune(model, opt, loader)

    def evaluate(self, model, loader):
        with torch.no_grad():
            return sum(float(torch.nn.functional.mse_loss(model(x), y)) for x, y in loader)
"""

TOOLKIT_SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from tools import Toolkit

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=8)
tools = Toolkit()
for epoch in range(2):
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    {use}
"""


def test_a_method_trainer_built_but_its_training_method_never_called(
    tmp_path: Path,
) -> None:
    """rev7 D5: ``tools = Toolkit()`` built only to call ``tools.evaluate(...)``;
    its ``finetune(model, opt, loader)`` trains a handed model but is never
    called, so the script's own setup is migrated. Calling ``finetune``, a
    method that reaches it (``tune_all``), or handing the instance on, leaves
    the file whole as before."""
    (tmp_path / "tools.py").write_text(TOOLKIT)
    probe = tmp_path / "probe.py"
    probe.write_text("import tools\n")
    fact = dict(read_project(str(probe)).helpers)["tools.Toolkit"]
    assert fact.method_trains.startswith("`finetune` calls backward")
    assert fact.untraining_methods == ("evaluate",)
    script = tmp_path / "train.py"
    script.write_text(TOOLKIT_SCRIPT.format(use="print(tools.evaluate(model, loader))"))
    result = migrate_source(script.read_bytes(), str(script))
    assert result.changed
    assert not [f for f in result.findings if f.status == "needs-review"]
    assert b"accel.prepare_model(nn.Linear(4, 1))" in result.output
    for use in (
        "tools.finetune(model, opt, loader)",
        "tools.tune_all(model, opt, loader)",
        "print(getattr(tools, 'finetune'))",
        "kit = tools",
    ):
        script.write_text(TOOLKIT_SCRIPT.format(use=use))
        result = migrate_source(script.read_bytes(), str(script))
        assert not result.changed, use
        (blocking,) = [f for f in result.findings if f.code == "AM004"]
        assert blocking.message.startswith(
            "`Toolkit()` builds `Toolkit` in tools.py, whose method trains"
        ), use


HOLDER = """\
import torch


class LossHolder:
    def __init__(self, net, lr):
        self.net = net
        self.opt = torch.optim.Adam(net.parameters(), lr=lr)

    def step(self, x):
        loss = self.net.penalty(x)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()
"""

NET = """\
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)

    def penalty(self, x):
        return self.fc(x).pow(2).mean()
"""

HOLDER_SCRIPT = """\
import torch

from holder import LossHolder
from net import Net

net = Net()
holder = LossHolder(net, 0.1)
for x in torch.randn(4, 2, 4):
    print(holder.step(x))
"""


def test_a_model_handed_to_a_holder_is_named_as_this_files(tmp_path: Path) -> None:
    """LightGCN's ``BPRLoss(Recmodel, config)`` in file mode: the file builds
    the model and hands it on; the finding says so, not that this file builds
    no model of that training."""
    (tmp_path / "holder.py").write_text(HOLDER)
    (tmp_path / "net.py").write_text(NET)
    script = tmp_path / "main.py"
    script.write_text(HOLDER_SCRIPT)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 7
    assert blocking.message.startswith(
        "`LossHolder(net, 0.1)` hands `net`, a model this file builds, to "
        "`LossHolder` in holder.py, which trains there: `step` calls backward"
    )
    assert "cannot follow that training (migrating the files together" in (
        blocking.message
    )
    assert "builds no model" not in blocking.message


def test_stepping_methods_are_those_whose_call_runs_a_backward() -> None:
    """Graph-WaveNet's trainer: ``train`` calls ``loss.backward()``, ``fit``
    calls ``self.train`` (a step too), ``eval`` runs none; a model's own
    ``self.backward()`` is not a tensor's."""
    import ast

    from accel_migrate.codemod.library_trainers import stepping_methods

    cls = ast.parse(
        "class trainer:\n"
        "    def train(self, x):\n"
        "        loss = self.model(x).mean()\n"
        "        loss.backward()\n"
        "        self.optimizer.step()\n"
        "    def fit(self, xs):\n"
        "        for x in xs:\n"
        "            self.train(x)\n"
        "    def eval(self, x):\n"
        "        return self.model(x).mean().item()\n"
        "    def hook(self):\n"
        "        self.backward()\n"
    ).body[0]
    assert isinstance(cls, ast.ClassDef)
    assert stepping_methods(cls) == ("fit", "train")
