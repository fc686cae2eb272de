"""A ``for`` whose items differ between processes but whose count does not is
no rank-dependent decision (``uniform_lengths``, AM028): jcwleo's ICM steps its
workers with ``for work, action in zip(works, actions)`` over ``actions =
np.random.randint(0, n, size=(num_worker,))`` (each process draws its own) and
``works`` built over ``range(num_worker)``. Before r36a, ``uniform_length`` read
neither ``zip(...)`` nor a draw of a fixed size, and AM028 left the whole file
unchanged for a decision every process takes alike."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8, shuffle=True)
for (x,) in loader:
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()

num_worker = 4
works = [[] for idx in range(num_worker)]
{draw}
for work, action in {loop}:
    torch.save(model.state_dict(), "ckpt_%d.pt" % len(work))
"""


def _am028(draw: str, loop: str) -> list[str]:
    source = SCRIPT.format(draw=draw, loop=loop)
    result = migrate_source(source, "train.py")
    return [f.message for f in result.needs_review if f.code == "AM028"]


@pytest.mark.parametrize(
    "draw, loop",
    [
        # ICM's warm-up: a numpy draw with a fixed size, zipped with the workers
        (
            "actions = np.random.randint(0, 2, size=(num_worker,))",
            "zip(works, actions)",
        ),
        # numpy's dimensions given positionally, through enumerate
        ("actions = np.random.rand(num_worker)", "enumerate(zip(works, actions))"),
        # a torch draw of a shape, beside a data loader (as many batches everywhere)
        ("actions = torch.randint(0, 2, (2,))", "zip(loader, actions)"),
        ("actions = torch.randperm(num_worker)", "zip(works, actions)"),
    ],
)
def test_a_loop_of_a_fixed_count_over_drawn_items_is_no_decision(
    draw: str, loop: str
) -> None:
    assert _am028(draw, loop) == []


@pytest.mark.parametrize(
    "draw, loop",
    [
        # how many are kept depends on the draw: the count differs
        (
            "drawn = np.random.randint(0, 2, size=(num_worker,))\n"
            "actions = [a for a in drawn if a > 0]",
            "zip(works, actions)",
        ),
        # a size read off this process's draw
        (
            "drawn = np.random.randint(0, 2, size=(num_worker,))\n"
            "actions = np.random.rand(int(drawn.sum()))",
            "zip(works, actions)",
        ),
        # a draw whose size is not given: not read
        (
            "actions = np.random.choice([0, 1, 2], np.random.randint(1, 3))",
            "zip(works, actions)",
        ),
        # a list grown from the data after it is bound to `[]`
        (
            "actions = []\nfor (x,) in loader:\n    if x.abs().max() > 2.0:\n"
            "        actions.append(x)",
            "zip(works, actions)",
        ),
        # zipped with a loader: the loop stops at the shorter, whose length
        # differs between processes (before r36a a loader loop, not reported)
        (
            "actions = [np.random.rand() for _ in range(np.random.randint(1, 5))]",
            "zip(loader, actions)",
        ),
        (
            "actions = [np.random.rand() for _ in range(np.random.randint(1, 5))]",
            "enumerate(zip(loader, actions))",
        ),
    ],
)
def test_a_count_that_may_differ_is_still_a_decision(draw: str, loop: str) -> None:
    found = _am028(draw, loop)
    assert len(found) == 1
    assert "differs between processes" in found[0]
