"""AM009 reads ``xs += [v]`` in a loop over a sharded loader as ``xs.append(v)``:
a per-batch accuracy collected so, then averaged after the loop, is made the
whole batch's as the ``.append`` form is (before: no finding at all)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ds = TensorDataset(torch.randn(64, 4), torch.randint(0, 3, (64,)))
loader = DataLoader(ds, batch_size=8, shuffle=True)
for x, y in loader:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
accs = []
with torch.no_grad():
    for x, y in DataLoader(ds, batch_size=8):
        {collect}
print(np.mean(accs))
"""

MEAN = "(model(x).argmax(1) == y).float().mean()"


@pytest.mark.parametrize(
    ("collect", "written"),
    [
        (f"accs += [{MEAN}.item()]", "`accs += [...]`"),
        (f"accs.append({MEAN}.item())", "`accs.append(...)`"),
    ],
)
def test_a_batch_mean_added_as_a_one_element_list(collect: str, written: str) -> None:
    result = migrate_source(SCRIPT.format(collect=collect), "train.py")
    found = [f for f in result.findings if f.code == "AM009"]
    assert [(f.line, f.status) for f in found] == [(17, "fixed")]
    assert written in found[0].message
    assert f"accel.global_loss({MEAN}).item()" in result.output


def test_a_list_of_two_is_no_append() -> None:
    # `accs += [a, b]` is an extend, not read as one collected value
    collect = f"accs += [{MEAN}.item(), 0.0]"
    result = migrate_source(SCRIPT.format(collect=collect), "train.py")
    assert "accel.global_loss" not in result.output
