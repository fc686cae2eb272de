"""An environment's ``step`` (``s, r, done, info = env.step(a)``) is not a
training step (``codemod/environment_steps.py``): a loop that steps
environments a random number of times decides no training (jcwleo's
curiosity-driven-exploration train.py stepped its workers over
``zip(works, actions)`` with ``actions`` drawn by ``np.random.randint``, and
AM028 left the batch unmigrated, calling the loop a training step)."""

from __future__ import annotations

import libcst as cst
import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.environment_steps import environment_step


def _assign(code: str) -> cst.Assign:
    statement = cst.parse_statement(code)
    assert isinstance(statement, cst.SimpleStatementLine)
    node = statement.body[0]
    assert isinstance(node, cst.Assign)
    return node


@pytest.mark.parametrize(
    "code",
    [
        "s, r, d, info = env.step(action)",
        "state, reward, done = env.step(action)",
        "[s, r, d, rd, lr] = work.step(a)",
    ],
)
def test_unpacked_into_three_names_is_an_environment_step(code: str) -> None:
    assert environment_step(_assign(code)) is not None


@pytest.mark.parametrize(
    "code",
    [
        "loss = optimizer.step(closure)",
        "out = env.step(action)",
        "a, b = thing.step()",
        "s, *rest = env.step(action)",
        "s, r, d = env.reset()",
        "x = y = opt.step()",
    ],
)
def test_other_steps_are_not(code: str) -> None:
    assert environment_step(_assign(code)) is None


_SCRIPT = """
import numpy as np
import torch
import torch.nn as nn


class Env:
    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def step(self, action):
        return self.rng.rand(3).astype(np.float32), 1.0, False, {}


np.random.seed(0)
torch.manual_seed(0)
model = nn.Linear(3, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
works = [Env(i) for i in range(4)]
for update in range(3):
    states = []
    actions = np.random.randint(0, 2, size=np.random.randint(1, 4))
    for work, action in zip(works, actions):
        STEP
        states.append(s)
    x = torch.tensor(np.stack(states))
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print("loss", loss.item())
"""


def test_a_loop_stepping_environments_is_no_training_decision() -> None:
    """The loop's turns are drawn at random, but its body only steps the
    environments: no AM028, and the script migrates."""
    source = _SCRIPT.replace("STEP", "s, r, done, _ = work.step(action)")
    result = migrate_source(source, "train.py")
    assert "AM028" not in {f.code for f in result.findings}
    assert "accel.backward(loss)" in str(result.output)


def test_a_loop_stepping_an_optimizer_is_still_one() -> None:
    """The same loop whose body steps something else by ``step`` (whose result is
    not unpacked as an environment's) is still a training decision."""
    source = _SCRIPT.replace("STEP", "s = work.step(action)[0]")
    result = migrate_source(source, "train.py")
    assert "AM028" in {f.code for f in result.findings}
