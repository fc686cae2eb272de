"""Batch mode: a model built through a helper that hands back the net it is
given (pytorch-adda's ``init_model(net=LeNetEncoder(), restore=...)``: loads
weights, moves it, ``return net``), handed to a function of a training file of
the batch that builds the optimizer over it (``train_src(encoder, classifier,
loader)``: ``Adam(list(encoder.parameters()) + list(classifier.parameters()))``).
Both files were left unmigrated with AM004 (the trials'
adda_pretrain_critic_t14c_project_batch); the script now prepares each model it
hands such a function, and the training file takes them as prepared by its
callers."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

UTILS = """\
import os

import torch


def init_model(net, restore):
    if restore is not None and os.path.exists(restore):
        net.load_state_dict(torch.load(restore))
    if torch.cuda.is_available():
        net.cuda()
    return net


def fresh_model(net, restore):
    net = torch.nn.Linear(4, 2)
    return net
"""

PRETRAIN = """\
import torch
import torch.optim as optim


def train_src(encoder, classifier, data_loader):
    encoder.train()
    classifier.train()
    optimizer = optim.Adam(list(encoder.parameters()) + list(classifier.parameters()), lr=1e-3)
    for epoch in range(2):
        for images, labels in data_loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(classifier(encoder(images)), labels)
            loss.backward()
            optimizer.step()
    return encoder, classifier
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from pretrain import train_src
from utils import {factory}

loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
encoder = {factory}(net=torch.nn.Linear(4, 4), restore=None)
classifier = {factory}(torch.nn.Linear(4, 2), None)
encoder, classifier = train_src(encoder, classifier, loader)
"""


def _migrate(tmp_path: Path, factory: str) -> tuple[str, str, list[str]]:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "pretrain.py").write_text(PRETRAIN)
    (tmp_path / "main.py").write_text(MAIN.format(factory=factory))
    files = [str(tmp_path / n) for n in ("main.py", "pretrain.py", "utils.py")]
    view = ProjectView(files)
    outputs = []
    review = []
    for name in ("main.py", "pretrain.py"):
        path = tmp_path / name
        result = migrate_source(
            path.read_bytes(),
            str(path),
            MigrateOptions(project=view.facts_for(str(path))),
        )
        outputs.append(result.output.decode())  # type: ignore[union-attr]
        review += [f.code for f in result.findings if f.status == "needs-review"]
    return outputs[0], outputs[1], review


def test_models_handed_to_a_function_that_optimizes_them_are_prepared(
    tmp_path: Path,
) -> None:
    main, pretrain, review = _migrate(tmp_path, "init_model")
    assert (
        "encoder = accel.prepare_model(init_model(net=torch.nn.Linear(4, 4), "
        "restore=None))" in main
    )
    assert (
        "classifier = accel.prepare_model(init_model(torch.nn.Linear(4, 2), None))"
        in main
    )
    assert "accel.backward(loss)" in pretrain
    assert "accel.prepare_optimizer(optim.Adam(" in pretrain
    assert "AM004" not in review


def test_only_a_parameter_handed_back_unchanged_is_relayed(tmp_path: Path) -> None:
    _migrate(tmp_path, "init_model")
    (tmp_path / "main.py").write_text(
        "from pretrain import train_src\nfrom utils import init_model, fresh_model\n"
    )
    view = ProjectView([str(tmp_path / n) for n in ("main.py", "utils.py")])
    helpers = dict(view.facts_for(str(tmp_path / "main.py")).helpers)
    assert helpers["utils.init_model"].returned_parameter == (0, "net")
    # `net = torch.nn.Linear(4, 2)` before `return net`: a new model, not `net`
    assert helpers["utils.fresh_model"].returned_parameter == (-1, "")
    pretrain = ProjectView([str(tmp_path / n) for n in ("main.py", "pretrain.py")])
    facts = dict(pretrain.facts_for(str(tmp_path / "main.py")).helpers)
    assert facts["pretrain.train_src"].optimized_parameters == (
        ("encoder", 0),
        ("classifier", 1),
    )
