"""AM040: ``torch.autograd.grad`` with respect to a model's parameters in a loop
over a sharded loader stops the migration; a per-task inner step and a gradient
with respect to the batch do not (the goldens in fixtures/parameter_gradients/
hold the whole shapes)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

HEAD = """\
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""


def _am040(body: str, head: str = HEAD) -> list[int]:
    result = migrate_source(head + body, "train.py")
    return [f.line for f in result.needs_review if f.code == "AM040"]


@pytest.mark.parametrize(
    "body",
    [
        # listed weights
        "for x, y in loader:\n"
        "    loss = F.mse_loss(model(x), y)\n"
        "    gw, gb = torch.autograd.grad(loss, [model.weight, model.bias])\n"
        "    model.weight.data -= 0.1 * gw\n",
        # through a dict of named parameters (MAML's fast weights)
        "fast = dict(model.named_parameters())\n"
        "for x, y in loader:\n"
        "    loss = F.mse_loss(model(x), y)\n"
        "    grads = torch.autograd.grad(loss, fast.values(), create_graph=True)\n"
        "    optimizer.zero_grad()\n"
        "    (loss + sum(g.pow(2).sum() for g in grads)).backward()\n"
        "    optimizer.step()\n",
        # in a function the loader loop runs
        "def step(x, y):\n"
        "    loss = F.mse_loss(model(x), y)\n"
        "    grads = torch.autograd.grad(loss, model.parameters())\n"
        "    for p, g in zip(model.parameters(), grads):\n"
        "        p.grad = g\n"
        "    optimizer.step()\n"
        "for x, y in loader:\n"
        "    step(x, y)\n",
    ],
    ids=["listed_weights", "named_parameters_dict", "in_a_function"],
)
def test_parameter_gradients_of_the_batch_are_reported(body: str) -> None:
    result = migrate_source(HEAD + body, "train.py")
    assert [f.code for f in result.needs_review if f.code == "AM040"] == ["AM040"]
    assert result.output == HEAD + body  # left unchanged


def test_a_gradient_with_respect_to_the_batch_is_not_reported() -> None:
    body = (
        "for x, y in loader:\n"
        "    x.requires_grad_(True)\n"
        "    out = model(x)\n"
        "    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)\n"
        "    loss = F.mse_loss(out, y) + g.pow(2).mean()\n"
        "    optimizer.zero_grad()\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    assert _am040(body) == []


def test_a_per_task_inner_step_over_the_batch_rows_is_migrated() -> None:
    body = (
        "for xs, ys in loader:\n"
        "    losses = []\n"
        "    for x_task, y_task in zip(xs, ys):\n"
        "        inner = F.mse_loss(model(x_task), y_task)\n"
        "        grads = torch.autograd.grad(inner, model.parameters(), create_graph=True)\n"
        "        w, b = [p - 0.1 * g for p, g in zip(model.parameters(), grads)]\n"
        "        losses.append(F.mse_loss(F.linear(x_task, w, b), y_task))\n"
        "    optimizer.zero_grad()\n"
        "    torch.stack(losses).mean().backward()\n"
        "    optimizer.step()\n"
    )
    assert _am040(body) == []
    # without create_graph the per-row gradients are applied some other way
    assert _am040(body.replace(", create_graph=True", "")) == [13]


def test_outside_a_loop_over_a_loader_it_is_not_reported() -> None:
    body = (
        "x, y = next(iter(loader))\n"
        "grads = torch.autograd.grad(F.mse_loss(model(x), y), model.parameters())\n"
        "print(sum(g.norm() for g in grads))\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        "    F.mse_loss(model(x), y).backward()\n"
        "    optimizer.step()\n"
    )
    assert _am040(body) == []
