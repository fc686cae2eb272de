"""Full-batch training (round 25b: tkipf/pygcn's ``model(features, adj)`` over
the whole graph every epoch, the loss over ``idx_train``): AM019 says the work
is not divided across processes, and that nothing else differs; a step that
makes its own data, samples a model outside the loss, or is handed its data
as a parameter is not reported so."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

HEAD = """\
import torch
import torch.nn.functional as F

features = torch.randn(20, 4)
adj = torch.eye(20)
labels = torch.randint(0, 3, (20,))
idx_train = torch.arange(10)
fixed_noise = torch.randn(8, 4)
model = torch.nn.Linear(4, 3)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
"""

FULL_GRAPH = HEAD + """

def train(epoch):
    model.train()
    optimizer.zero_grad()
    output = model(adj @ features)
    loss_train = F.cross_entropy(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()


for epoch in range(12):
    train(epoch)
"""


def _am019(source: str) -> list[str]:
    result = migrate_source(source, "train.py")
    return [f.message for f in result.findings if f.code == "AM019"]


@pytest.mark.parametrize(
    ("call", "inputs"),
    [
        ("model(adj @ features)", "`adj`, `features`"),
        ("model(features.cuda())", "`features`"),
    ],
)
def test_a_step_over_the_whole_graph_is_reported_as_undivided(
    call: str, inputs: str
) -> None:
    (message,) = _am019(FULL_GRAPH.replace("model(adj @ features)", call))
    assert message.startswith(
        "the work of this loop is not divided across processes: each step runs "
        f"`model` over the whole of {inputs}, made before the loop"
    )
    assert "does the work of one N times over" in message
    assert "the averaged gradients" not in message
    assert "before the gradients are averaged" in message


@pytest.mark.parametrize(
    ("step", "inputs"),
    [
        ("output = model(features)\n", "`features`"),
        (
            "h = model(features)\n    output = h + model(fixed_noise).mean()\n",
            "`fixed_noise`, `features`",
        ),
    ],
)
def test_a_module_loop_over_stored_data_names_every_input(
    step: str, inputs: str
) -> None:
    source = HEAD + (
        "for epoch in range(5):\n"
        "    optimizer.zero_grad()\n"
        f"    {step}"
        "    loss = F.cross_entropy(output[idx_train], labels[idx_train])\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    (message,) = _am019(source)
    assert f"runs `model` over the whole of {inputs}, made before" in message


@pytest.mark.parametrize(
    "step",
    [
        # data made in the step: nothing to divide
        "x = torch.randn(20, 4)\n    output = model(x)\n",
        # a model run on stored data outside the loss (samples for a picture)
        "output = model(torch.randn(20, 4))\n    shown = model(fixed_noise)\n",
    ],
)
def test_a_step_without_stored_data_in_its_loss_is_not_reported(step: str) -> None:
    source = HEAD + (
        "for epoch in range(5):\n"
        "    optimizer.zero_grad()\n"
        f"    {step}"
        "    loss = F.cross_entropy(output[idx_train], labels[idx_train])\n"
        "    loss.backward()\n"
        "    optimizer.step()\n"
    )
    assert _am019(source) == []


def test_data_handed_as_a_parameter_is_not_reported() -> None:
    source = FULL_GRAPH.replace("model(adj @ features)", "model(features)")
    source = source.replace("def train(epoch):", "def train(epoch, features):")
    source = source.replace("train(epoch)\n", "train(epoch, features)\n")
    assert _am019(source) == []
