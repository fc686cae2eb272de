"""AM021 and forwards whose graph a gradient call takes: an SGLD step's
``torch.autograd.grad(f(x_k).sum(), [x_k])`` needs the forward's graph, so it
is never put under ``torch.no_grad()`` (where the call raises "element 0 of
tensors does not require grad"); a forward only read detached still is."""

from __future__ import annotations

import ast

import pytest

from accel_migrate.codemod import migrate_source

HEAD = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
"""

STEP = """
for (x,) in loader:
    x_q = sample_q(model, x)
    loss = model(x).mean() - model(x_q).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

IN_STATEMENT = """
def sample_q(f, x):
    x_k = x.clone().requires_grad_(True)
    grad = torch.autograd.grad(f(x_k).sum(), [x_k])[0]
    return (x_k + 0.1 * grad).detach()
"""

THROUGH_A_NAME = """
def sample_q(f, x):
    x_k = x.clone().requires_grad_(True)
    energy = f(x_k).sum()
    grad = torch.autograd.grad(energy, [x_k])[0]
    return (x_k + 0.1 * grad).detach()
"""

DETACHED_ONLY = """
def sample_q(f, x):
    score = f(x)
    return (x + 0.1 * score.detach()).detach()
"""


@pytest.mark.parametrize("helper", [IN_STATEMENT, THROUGH_A_NAME], ids=["call", "name"])
def test_a_forward_a_gradient_call_takes_keeps_its_graph(helper: str) -> None:
    result = migrate_source(HEAD + helper + STEP, "train.py")
    output = str(result.output)
    ast.parse(output)
    assert "no_grad" not in output
    assert not [f for f in result.findings if f.code == "AM021"]
    assert "accel.prepare_model(" in output


def test_a_forward_read_only_detached_is_still_put_under_no_grad() -> None:
    result = migrate_source(HEAD + DETACHED_ONLY + STEP, "train.py")
    found = [f for f in result.findings if f.code == "AM021"]
    assert [f.status for f in found] == ["fixed"]
    assert "with torch.no_grad():\n        score = f(x)" in str(result.output)
