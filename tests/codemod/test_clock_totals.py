"""A total of clock readings (``T = 0.0``; ``T += time.time() - t0``, the shape
of SASRec.pytorch's main.py) is each process's own elapsed time, as right as
the original's: a print of it is no share of the batch (AM033 says nothing),
while a total of the batch's own values printed the same way is still
reported."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import time
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
T = 0.0
t0 = time.time()
for epoch in range(2):
    for (x,) in loader:
        opt.zero_grad()
        loss = model(x).mean()
        loss.backward()
        opt.step()
        n = len(x)
        t1 = INCREMENT
        T += t1
        print("total: %f" % T)
        t0 = time.time()
"""


def _am033(increment: str) -> list[str]:
    result = migrate_source(SCRIPT.replace("INCREMENT", increment), "train.py")
    return [f.message for f in result.findings if f.code == "AM033"]


@pytest.mark.parametrize("increment", ["time.time() - t0", "(time.time() - t0) / 60"])
def test_a_total_of_clock_readings_is_not_reported(increment: str) -> None:
    assert _am033(increment) == []


def test_a_total_of_the_batch_values_is_still_reported() -> None:
    found = _am033("x.tolist()[0][0]")
    assert len(found) == 1 and "total: %f" in found[0], found
