"""A step that picks its batch out of stored data by indices it draws itself
(powerful-gnns' ``np.random.permutation(len(train_graphs))[:batch_size]`` then
``[train_graphs[idx] for idx in selected_idx]``): no loader shards it, every
process trains on the same whole batch, and the runtime's synchronised batch
norm counts each copy as samples of its own (its running variance differs).
Before round t8c no finding said so (the GIN case was FLAGGED only for
unrelated reasons); AM019 now reports it."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import random

import numpy as np
import torch

graphs = [torch.randn(4) for _ in range(20)]
labels = torch.randint(0, 2, (20,))
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(3):
    for it in range(2):
        PICK
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""

PICKS = {
    "permutation": (
        "selected_idx = np.random.permutation(len(graphs))[:8]\n"
        "        x = torch.stack([graphs[idx] for idx in selected_idx])\n"
        "        y = labels[selected_idx]"
    ),
    "randint": (
        "idx = torch.randint(0, 20, (8,))\n"
        "        x = torch.stack([graphs[int(i)] for i in idx])\n"
        "        y = labels[idx]"
    ),
    "sample": (
        "chosen = random.sample(range(20), 8)\n"
        "        x = torch.stack([graphs[i] for i in chosen])\n"
        "        y = labels[chosen]"
    ),
}


def _am019(pick: str) -> list[str]:
    result = migrate_source(SCRIPT.replace("PICK", pick), "train.py")
    return [
        f.message
        for f in result.findings
        if f.code == "AM019" and f.status == "needs-review"
    ]


@pytest.mark.parametrize("name", sorted(PICKS))
def test_a_batch_picked_by_drawn_indices_is_reported(name: str) -> None:
    found = _am019(PICKS[name])
    assert len(found) == 1, found
    assert "by indices it draws itself" in found[0]
    assert "running variance" in found[0]


def test_indices_that_are_not_drawn_are_not_this_finding() -> None:
    pick = (
        "selected_idx = list(range(it * 8, it * 8 + 8))\n"
        "        x = torch.stack([graphs[idx] for idx in selected_idx])\n"
        "        y = labels[selected_idx]"
    )
    assert not any("by indices it draws itself" in f for f in _am019(pick))


def test_a_batch_drawn_fresh_in_the_step_is_not_stored_data() -> None:
    pick = "x = torch.randn(8, 4)\n        y = torch.randint(0, 2, (8,))"
    assert _am019(pick) == []
