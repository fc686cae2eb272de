"""Cross-file callers (issue 12): in batch mode a file learns how the batch's
other files call its functions (``ProjectFacts.callers``, computed once per
view), and a training engine module whose model, optimizer and loaders all come
from its callers is migrated with them instead of being left whole."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_facts import CallSite
from accel_migrate.codemod.project_file_facts import ProjectFacts
from accel_migrate.codemod.project_view import ProjectView, read_project

ENGINE = """\
import torch.nn.functional as F


def train_one_epoch(model, optimizer, loader):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def evaluate(model, loader):
    correct = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)
"""

TRAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

import engine

data = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
loader = DataLoader(data, batch_size=4, shuffle=True)
net = torch.nn.Linear(4, 2).to("cpu")
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for epoch in range(2):
    engine.train_one_epoch(net, opt, loader)
    print(engine.evaluate(net, loader))
"""


def _project(tmp_path: Path, train: str = TRAIN) -> tuple[Path, Path]:
    (tmp_path / "engine.py").write_text(ENGINE)
    (tmp_path / "train.py").write_text(train)
    return tmp_path / "engine.py", tmp_path / "train.py"


def test_a_batch_file_knows_its_callers_and_what_they_pass(tmp_path: Path) -> None:
    engine, train = _project(tmp_path)
    view = ProjectView([str(engine), str(train)])
    facts = view.facts_for(str(engine))
    (site,) = facts.callers_of("train_one_epoch")
    assert site.where == "train.py:11"
    assert dict(site.arguments) == {
        "model": "model",
        "optimizer": "optimizer",
        "loader": "loader",
    }
    assert facts.callers_of("evaluate")[0].kind("loader") == "loader"
    assert not view.facts_for(str(train)).callers  # nothing calls train.py
    # part of the cache key: a caller that changes changes the engine's result
    assert facts.digest() != ProjectFacts(facts.helpers, facts.files).digest()


def test_with_one_file_argument_there_are_no_callers(tmp_path: Path) -> None:
    engine, _ = _project(tmp_path)
    assert not read_project(str(engine)).callers
    result = migrate_source(engine.read_text(), str(engine))
    assert result.output == engine.read_text()  # the model's origin is unknown
    assert [f.code for f in result.needs_review] == ["AM004"]


def test_the_engine_is_migrated_with_the_callers_setup(tmp_path: Path) -> None:
    engine, train = _project(tmp_path)
    view = ProjectView([str(engine), str(train)])
    result = migrate_source(
        engine.read_text(),
        str(engine),
        MigrateOptions(project=view.facts_for(str(engine))),
    )
    assert "accel.backward(" in result.output
    # the loader comes from train.py, which shards it: the sum is reduced here
    assert "correct = accel.reduce(correct)" in result.output
    assert "accel.prepare_model" not in result.output  # train.py prepares it
    # one info for each function's `model`: train_one_epoch's and evaluate's
    info = [f for f in result.findings if f.code == "AM004"]
    assert [f.status for f in info] == ["info", "info"]
    assert "train.py:11" in info[0].message
    assert all("train.py:" in f.message for f in info)
    assert not result.needs_review


def test_a_caller_that_passes_no_model_it_builds_keeps_the_block(
    tmp_path: Path,
) -> None:
    engine, train = _project(
        tmp_path,
        TRAIN.replace('net = torch.nn.Linear(4, 2).to("cpu")', "from zoo import net"),
    )
    view = ProjectView([str(engine), str(train)])
    facts = view.facts_for(str(engine))
    assert facts.callers_of("train_one_epoch")[0].kind("model") == ""
    result = migrate_source(
        engine.read_text(), str(engine), MigrateOptions(project=facts)
    )
    assert result.output == engine.read_text()
    assert [f.code for f in result.needs_review] == ["AM004"]


def test_a_call_site_names_its_parameters() -> None:
    site = CallSite("train.py", 3, (("model", "model"), ("epoch", "")))
    assert site.kind("model") == "model"
    assert site.kind("epoch") == site.kind("missing") == ""


REGISTRY = """\
_MODELS = {"linear": lambda: __import__("torch").nn.Linear(4, 2)}


def build_model(name):
    return _MODELS[name]()
"""


def test_a_model_from_a_registry_is_a_model_where_an_optimizer_takes_it(
    tmp_path: Path,
) -> None:
    # was "": `build_model(name)` returns a registry lookup the view cannot read,
    # so the engine's `model` was not known to come from the caller, and both
    # files were left whole (AM004, AM103)
    (tmp_path / "models.py").write_text(REGISTRY)
    train = TRAIN.replace(
        "import engine\n", "import engine\nfrom models import build_model\n"
    )
    train = train.replace('torch.nn.Linear(4, 2).to("cpu")', 'build_model("linear")')
    engine, script = _project(tmp_path, train)
    view = ProjectView([str(engine), str(script), str(tmp_path / "models.py")])
    (site,) = view.facts_for(str(engine)).callers_of("train_one_epoch")
    assert site.kind("model") == "model"
    # not where no optimizer of the caller takes its parameters
    frozen = train.replace("net.parameters()", "[torch.nn.Parameter(torch.zeros(1))]")
    script.write_text(frozen)
    view = ProjectView([str(engine), str(script), str(tmp_path / "models.py")])
    (site,) = view.facts_for(str(engine)).callers_of("train_one_epoch")
    assert site.kind("model") == ""


DATA = """\
import torch
from torch.utils.data import DataLoader, TensorDataset


def get_loaders():
    data = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
    return DataLoader(data, batch_size=4, shuffle=True), DataLoader(data, batch_size=4)
"""


def test_a_loader_unpacked_from_a_helpers_tuple_is_a_loader(tmp_path: Path) -> None:
    # was "": `evaluate`'s sums over the sharded loader were not reduced in
    # engine.py, and train.py said nothing (engine.py is migrated in the batch)
    (tmp_path / "data.py").write_text(DATA)
    train = TRAIN.replace(
        "import engine\n", "import engine\nfrom data import get_loaders\n"
    )
    train = train.replace(
        "loader = DataLoader(data, batch_size=4, shuffle=True)",
        "loader, val_loader = get_loaders()",
    ).replace("engine.evaluate(net, loader)", "engine.evaluate(net, val_loader)")
    engine, script = _project(tmp_path, train)
    view = ProjectView([str(engine), str(script), str(tmp_path / "data.py")])
    facts = view.facts_for(str(engine))
    assert facts.callers_of("evaluate")[0].kind("loader") == "loader"
    assert facts.callers_of("train_one_epoch")[0].kind("loader") == "loader"
    result = migrate_source(
        engine.read_text(), str(engine), MigrateOptions(project=facts)
    )
    assert "correct = accel.reduce(correct)" in result.output


DICT_ENGINE = """\
import torch.nn.functional as F


def fit(model, optimizer, loaders, epochs):
    for epoch in range(epochs):
        step(model=model, optimizer=optimizer, loader=loaders["train"])
        print(evaluate(model=model, loader=loaders["val"]))


def step(model, optimizer, loader):
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def evaluate(model, loader):
    correct = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()
    return correct / len(loader.dataset)
"""

DICT_TRAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from data import get_loaders
from engine import fit

data = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
tl, vl = get_loaders()
net = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
fit(net, opt, loaders={"train": tl, "val": vl}, epochs=2)
fit(net, opt, {"train": DataLoader(data, batch_size=4), "val": vl}, 1)
"""


def test_a_dict_of_loaders_handed_by_keyword_is_reduced_over(tmp_path: Path) -> None:
    """``fit(model, opt, loaders={"train": tl, "val": vl})``: each call hands a
    dict of the caller's (sharded) loaders, which ``fit`` hands on by keyword as
    ``loaders["val"]``; the sum ``evaluate`` makes over it is reduced in
    engine.py (it was not, and nothing said so: the eval line was this process's
    share)."""
    (tmp_path / "data.py").write_text(DATA)
    (tmp_path / "engine.py").write_text(DICT_ENGINE)
    (tmp_path / "train.py").write_text(DICT_TRAIN)
    engine = tmp_path / "engine.py"
    view = ProjectView(
        [str(engine), str(tmp_path / "train.py"), str(tmp_path / "data.py")]
    )
    facts = view.facts_for(str(engine))
    sites = facts.callers_of("fit")
    assert {s.line: s.kind("loaders") for s in sites} == {11: "loaders", 12: "loaders"}
    result = migrate_source(
        engine.read_text(), str(engine), MigrateOptions(project=facts)
    )
    assert "correct = accel.reduce(correct)" in result.output
    assert "accel.backward(" in result.output


def test_a_dict_with_something_else_than_loaders_is_not_loaders(
    tmp_path: Path,
) -> None:
    (tmp_path / "data.py").write_text(DATA)
    (tmp_path / "engine.py").write_text(DICT_ENGINE)
    (tmp_path / "train.py").write_text(
        DICT_TRAIN.replace('"val": vl}, 1)', '"val": [1, 2]}, 1)')
    )
    engine = tmp_path / "engine.py"
    view = ProjectView(
        [str(engine), str(tmp_path / "train.py"), str(tmp_path / "data.py")]
    )
    sites = view.facts_for(str(engine)).callers_of("fit")
    assert {s.line: s.kind("loaders") for s in sites} == {11: "loaders", 12: ""}


TUPLE_TRAINER = """\
import torch.nn.functional as F


class Trainer:
    def __init__(self, model, optimizer, data_loader):
        self.model = model
        self.optimizer = optimizer
        self.train_loader = data_loader[0]
        self.valid_loader = data_loader[1]

    def train(self):
        for x, y in self.train_loader:
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.optimizer.step()
        correct = 0
        for x, y in self.valid_loader:
            correct += (self.model(x).argmax(1) == y).sum().item()
        print("eval correct", correct)
"""

TUPLE_MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainer import Trainer

data = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
test_loader = DataLoader(data, batch_size=4)
net = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
if TRAINING:
    train_loader = DataLoader(data, batch_size=4, shuffle=True)
    data_loader = (train_loader, test_loader)
else:
    data_loader = test_loader
Trainer(net, opt, data_loader).train()
"""


def _tuple_project(tmp_path: Path, main: str) -> tuple[Path, ProjectFacts]:
    (tmp_path / "trainer.py").write_text(TUPLE_TRAINER)
    (tmp_path / "main.py").write_text(main.replace("TRAINING", "True"))
    trainer = tmp_path / "trainer.py"
    view = ProjectView([str(trainer), str(tmp_path / "main.py")])
    return trainer, view.facts_for(str(trainer))


def test_a_tuple_of_loaders_subscripted_by_a_constant_is_loaders(
    tmp_path: Path,
) -> None:
    """Deep-Mutual-Learning's ``Trainer(config, data_loader)`` with
    ``data_loader = (train_loader, test_loader)`` when training (else the test
    loader alone), and ``self.train_loader = data_loader[0]`` in the Trainer:
    the items are the caller's (sharded) loaders, so the count summed over
    ``self.valid_loader`` is reduced, and no AM019 says the training loop's
    loader is not prepared (it did, untrue)."""
    trainer, facts = _tuple_project(tmp_path, TUPLE_MAIN)
    (site,) = facts.callers_of("Trainer.__init__")
    assert site.kind("data_loader") == "loader or loaders"
    result = migrate_source(
        trainer.read_text(), str(trainer), MigrateOptions(project=facts)
    )
    assert "correct = accel.reduce(correct)" in result.output
    assert "AM019" not in {f.code for f in result.findings}


def test_a_parameter_handed_a_loader_or_something_else_is_not_loaders(
    tmp_path: Path,
) -> None:
    """The other path hands a list of numbers, not a loader: the subscripts of
    the parameter are not known as loaders, and AM019 says so."""
    main = TUPLE_MAIN.replace("data_loader = test_loader", "data_loader = [1, 2]")
    trainer, facts = _tuple_project(tmp_path, main)
    (site,) = facts.callers_of("Trainer.__init__")
    assert site.kind("data_loader") == ""
    result = migrate_source(
        trainer.read_text(), str(trainer), MigrateOptions(project=facts)
    )
    assert "accel.reduce(correct)" not in result.output
    assert "AM019" in {f.code for f in result.findings}
