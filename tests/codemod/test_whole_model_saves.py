"""AM010 on ``torch.save(model, f)`` of a whole prepared model: the save is
still the main process's, and the finding says what the file holds under
each strategy (the user's module under DDP; under FSDP or ZeRO-3 accel.save
raises, the parameters being split), and what to save there instead."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=4):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
{save}
"""


def _saves(save: str) -> list[str]:
    result = migrate_source(SCRIPT.format(save=save), "train.py")
    return [f.message for f in result.findings if f.code == "AM010"]


@pytest.mark.parametrize(
    "save",
    [
        'torch.save(model, "model.pt")',
        'with open("model.pt", "wb") as f:\n    torch.save(model, f)',
    ],
)
def test_a_whole_prepared_model_save_names_the_sharded_strategies(save: str) -> None:
    (message,) = _saves(save)
    assert "it saves the whole prepared model `model`" in message
    assert "accel.save raises" in message
    assert "save accel.state_dict(model)" in message


def test_a_state_dict_save_says_nothing_of_it() -> None:
    (message,) = _saves('torch.save(model.state_dict(), "model.pt")')
    assert "whole prepared model" not in message
