"""``zip(loader, weights)`` in a function whose ``weights`` parameter a call of the
file hands a list whose length differs between processes (rev17's review: the
same loop written inline was AM028; in a function it was migrated with no
finding, and the processes' step counts could differ: a hang)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
crit = nn.MSELoss()
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)


def train(loader, weights, epoch):
    for (x, y), w in zip(loader, weights):
        opt.zero_grad()
        loss = w * crit(model(x), y)
        loss.backward()
        opt.step()


hard = []
for epoch in range(2):
    weights = WEIGHTS
    train(loader, weights, epoch)
    with torch.no_grad():
        for x, y in loader:
            if (model(x) - y).abs().max().item() > 1.6:
                hard.append(1)
"""


def _am028(weights: str) -> list[str]:
    result = migrate_source(SCRIPT.replace("WEIGHTS", weights), "train.py")
    return [f.status for f in result.findings if f.code == "AM028"]


def test_a_rank_local_list_handed_to_the_zip_is_a_decision() -> None:
    assert _am028("[1.0] * (3 + len(hard))") == ["needs-review"]


@pytest.mark.parametrize("weights", ["[1.0] * 3", "[1.0] * (3 + epoch)"])
def test_a_list_the_same_on_every_process_is_not(weights: str) -> None:
    assert _am028(weights) == []


def test_a_call_whose_result_is_kept_hands_it_too() -> None:
    """``last = train(...)``: the argument's provenance, not the call's standing
    as a statement (rev18b: the first version asked ``divergence.local_calls``,
    statement calls only, and this call went unreported)."""
    source = SCRIPT.replace("WEIGHTS", "[1.0] * (3 + len(hard))").replace(
        "    train(loader, weights, epoch)", "    last = train(loader, weights, epoch)"
    )
    result = migrate_source(source, "train.py")
    assert [f.status for f in result.findings if f.code == "AM028"] == ["needs-review"]
