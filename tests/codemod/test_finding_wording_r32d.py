"""Findings whose reasons named the wrong thing in the trials (r32d, issue 12):

- a trainer function's only backward under a test (TRADES' ``l_2`` attack
  branch) is named with its test;
- a loop's target in its body is that loop's binding (TFT's validation mean
  named the training loader, the first ``for batch in ...``);
- AM004 names the binding it cannot wrap (CenterNet's ``model, optimizer,
  start_epoch = load_model(...)``), not the plain ``model = create_model(...)``
  before it;
- ``sampler=None`` is no sampler: a validation loader of batch 1 with
  ``shuffle=False`` is a fixed order, left whole (HiFi-GAN), not reported for
  shuffling and gradients.
"""

from __future__ import annotations

import ast
from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.function_trainers import function_trains_handed
from accel_migrate.codemod.project_view import read_project

ATTACK = """\
def robust_loss(model, x, y, optimizer, distance="l_inf"):
    if distance == "l_2":
        delta = x.clone().requires_grad_()
        loss = model(x + delta).sum()
        loss.backward()
    optimizer.zero_grad()
    return (model(x) - y).pow(2).mean()
"""


def test_a_backward_under_a_test_names_the_test() -> None:
    function = ast.parse(ATTACK).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert function_trains_handed(function) == (
        "`robust_loss` calls backward (line 5, where `distance == 'l_2'`) in a "
        "step that runs `model`, its parameter"
    )


EARLY_STOP = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.randn(8, 4), batch_size=4)
valid_loader = DataLoader(torch.randn(8, 4), batch_size=4)
best = float("inf")
wait = 0
for epoch in range(3):
    for batch in loader:
        loss = model(batch).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    valid = 0.0
    for batch in valid_loader:
        valid = float(batch.abs().max())
    if valid < best:
        best = valid
        wait = 0
        torch.save(model.state_dict(), "best.pt")
    else:
        wait += 1
        if wait >= 2:
            break
"""


def test_a_loop_target_is_the_enclosing_loops() -> None:
    result = migrate_source(EARLY_STOP, "train.py")
    [finding] = [f for f in result.findings if f.code == "AM028"]
    assert "(`valid_loader` at line 17)" in finding.message, finding.message
    assert "`loader` at line" not in finding.message


REBOUND = """\
import torch
from torch.utils.data import DataLoader

from models import create_model, load_model

model = create_model()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
if RESUME:
    model, optimizer, start = load_model(model, "ckpt.pt", optimizer)
loader = DataLoader(torch.randn(8, 4), batch_size=4)
for x in loader:
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""

MODELS = """\
import copy

import torch


def create_model():
    return torch.nn.Linear(4, 1)


def load_model(model, path, optimizer):
    return copy.deepcopy(model), optimizer, 0
"""


def test_am004_names_the_rebinding_it_cannot_wrap(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    main = tmp_path / "main.py"
    main.write_text(REBOUND)
    result = migrate_source(
        REBOUND, str(main), MigrateOptions(project=read_project(str(main)))
    )
    [finding] = [
        f for f in result.findings if f.code == "AM004" and f.status == "needs-review"
    ]
    assert finding.line == 9
    assert "`model, optimizer, start = load_model(" in finding.message
    assert "create_model()`" not in finding.message


VALIDATION = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.randn(8, 4), batch_size=4, shuffle=True)
valid_loader = DataLoader(torch.randn(4, 4), shuffle=False, sampler=None, batch_size=1)
for x in loader:
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
with torch.no_grad():
    err = 0.0
    for x in valid_loader:
        err += model(x).abs().mean().item()
print(err)
"""


def test_a_validation_loader_with_sampler_none_is_a_fixed_order() -> None:
    result = migrate_source(VALIDATION, "train.py")
    [finding] = [
        f for f in result.findings if f.code == "AM006" and f.status == "needs-review"
    ]
    assert "gives one sample a batch, which cannot be split" in finding.message
    assert "in an order it may shuffle" not in finding.message
    assert "gradients" not in finding.message
    assert "valid_loader = DataLoader(" in str(result.output)
