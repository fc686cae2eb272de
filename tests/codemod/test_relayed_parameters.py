"""A model handed to a helper of another module and taken back from it
(DeepKnowledgeTracing-DKT-Pytorch's ``model, optimizer = eval.train(loaders,
model, optimizer, lossFunc)``, whose ``train`` relays ``train_epoch``'s
``return model, optimizer``). Round t8a made AM004 treat a model name unpacked
from a call no wrap reaches as unprepared (SupContrast's ``set_model``); that
must not count a helper that hands back the very model it was given."""

from __future__ import annotations

import ast
from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project
from accel_migrate.codemod.relayed_parameters import NOT_RELAYED, relayed_parameters

HELPERS = """
import torch


def train_epoch(model, loader, optimizer, loss_fn):
    for x, y in loader:
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model, optimizer


def train(loaders, model, optimizer, loss_fn):
    for loader in loaders:
        model, optimizer = train_epoch(model, loader, optimizer, loss_fn)
    return model, optimizer


def train_fresh(loaders, model, optimizer, loss_fn):
    model = torch.nn.Linear(4, 2)
    return model, optimizer


def train_swapped(loaders, model, optimizer, loss_fn):
    other, optimizer = train_epoch(optimizer, loaders[0], model, loss_fn)
    return model, optimizer
"""

MAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

import helpers

model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))))
for epoch in range(2):
    model, optimizer = helpers.{name}([loader], model, optimizer, torch.nn.functional.cross_entropy)
"""


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(source)
    return {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}


def _relayed(name: str) -> tuple[tuple[int, str], ...]:
    functions = _functions(HELPERS)
    function = functions[name]
    returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
    return relayed_parameters(function, returns, functions)


def test_parameters_handed_back_unchanged_are_relayed() -> None:
    assert _relayed("train_epoch") == ((0, "model"), (2, "optimizer"))
    # rebinding through a function that relays them keeps the objects
    assert _relayed("train") == ((1, "model"), (2, "optimizer"))


def test_a_rebound_or_swapped_parameter_is_not_relayed() -> None:
    assert _relayed("train_fresh") == (NOT_RELAYED, (2, "optimizer"))
    # train_epoch hands back at position 0 what it was given there: `optimizer`,
    # so `other` is not `model`, and `optimizer` is rebound to the model
    assert _relayed("train_swapped") == ((1, "model"), NOT_RELAYED)


def _migrate(tmp_path: Path, name: str) -> tuple[str, list[str]]:
    (tmp_path / "helpers.py").write_text(HELPERS)
    main = tmp_path / "main.py"
    main.write_text(MAIN.format(name=name))
    assert dict(read_project(str(main)).helpers)[f"helpers.{name}"].relayed
    # batch mode (both files given): helpers.py is migrated too, so handing the
    # model to its training loop is no reason to leave main.py whole
    view = ProjectView([str(tmp_path / "helpers.py"), str(main)])
    options = MigrateOptions(project=view.facts_for(str(main)))
    result = migrate_source(main.read_bytes(), str(main), options)
    out = result.output.decode()  # type: ignore[union-attr]
    return out, [f.code for f in result.findings if f.status == "needs-review"]


def test_model_taken_back_from_a_relaying_helper_stays_prepared(
    tmp_path: Path,
) -> None:
    out, _ = _migrate(tmp_path, "train")
    assert "model = accel.prepare_model(torch.nn.Linear(4, 2))" in out


def test_model_taken_back_from_a_helper_that_builds_a_new_one_is_refused(
    tmp_path: Path,
) -> None:
    out, review = _migrate(tmp_path, "train_fresh")
    assert "accel." not in out
    assert "AM004" in review


LOCAL = """
import torch
from torch.utils.data import DataLoader, TensorDataset


def train_model(model, loader, optimizer, epochs):
    best = 0.0
    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        best = max(best, float(loss))
    {extra}return model, best


def main():
    loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))))
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, best = train_model(model, loader, optimizer, 2)
    torch.save(model.state_dict(), "model.pt")
"""


def _migrate_local(extra: str) -> tuple[str, list[str]]:
    result = migrate_source(LOCAL.format(extra=extra).encode(), "main.py")
    out = result.output.decode()  # type: ignore[union-attr]
    return out, [f.code for f in result.findings if f.status == "needs-review"]


def test_model_taken_back_from_a_relaying_function_of_this_file_stays_prepared() -> (
    None
):
    # `model, best = train_model(model, ...)` (the trials' phase-loop scripts):
    # as `model = train_model(model, ...)` migrates, so does the tuple form
    out, review = _migrate_local("")
    assert "model = accel.prepare_model(torch.nn.Linear(4, 2))" in out
    assert "accel.backward(loss)" in out
    assert "AM004" not in review


def test_model_taken_back_from_a_function_of_this_file_that_rebinds_it_is_refused() -> (
    None
):
    out, review = _migrate_local("model = torch.nn.Linear(4, 2)\n    ")
    assert "accel." not in out
    assert "AM004" in review
