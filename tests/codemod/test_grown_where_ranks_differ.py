"""A container grown where only some processes go has a length that differs
between processes, even when what is added is the same on every process
(``if loss.item() > t: hard.append(1.0)``). Before fx37a only the added values
made the container rank-local: ``zip(loader, hard)``, ``range(len(hard))`` and
``if len(hard) > k: break`` around training steps were read as the same on
every process, and the migrated run took a different number of steps per
process (a collective mismatch: a hang, or mismatched reductions)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import collections

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
hard = {start}
for (x,) in loader:
    with torch.no_grad():
        score = model(x).abs().max().item()
    if {test}:
        {grow}
{use}
"""

_ZIP = """\
for (x,), w in zip(loader, hard):
    opt.zero_grad()
    loss = model(x).pow(2).mean() * w
    loss.backward()
    opt.step()
"""

_RANGE = """\
for _ in range(len(hard)):
    opt.zero_grad()
    loss = model(torch.ones(2, 4)).pow(2).mean()
    loss.backward()
    opt.step()
"""

_BREAK = """\
for epoch in range(4):
    for (x,) in loader:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
    if len(hard) > 2:
        break
"""

_GROWTHS = [
    ("[]", "hard.append(1.0)"),
    ("[]", "hard.extend([1.0, 1.0])"),
    ("[]", "hard.insert(0, 1)"),
    ("set()", "hard.add(len(hard))"),
    ("{}", "hard[len(hard)] = 1.0"),
    ("[]", "hard += [1.0]"),
    # one list of growers for the divergence and the rank-local sources (the
    # second missed setdefault: no AM028, rev18b), deques' too
    ("{}", "hard.setdefault(len(hard), 1.0)"),
    ("collections.deque()", "hard.appendleft(1.0)"),
]


def _am028(start: str, test: str, grow: str, use: str) -> list[str]:
    source = SCRIPT.format(start=start, test=test, grow=grow, use=use)
    result = migrate_source(source, "train.py")
    return [f.message for f in result.needs_review if f.code == "AM028"]


@pytest.mark.parametrize("use", [_ZIP, _RANGE, _BREAK], ids=["zip", "range", "break"])
@pytest.mark.parametrize("start, grow", _GROWTHS)
def test_grown_under_a_test_of_the_data_its_length_differs(
    start: str, grow: str, use: str
) -> None:
    found = _am028(start, "score > 1.0", grow, use)
    assert found, "a count grown under a test of this process's data went unreported"
    assert any("differs between processes" in message for message in found)


@pytest.mark.parametrize("use", [_ZIP, _RANGE, _BREAK], ids=["zip", "range", "break"])
def test_grown_in_a_loop_over_local_items_its_length_differs(use: str) -> None:
    # a loop over this process's own items (a rank-dependent count of runs)
    source = SCRIPT.format(
        start="[]",
        test="True",
        grow="for v in x[x > 0]:\n            hard.append(1.0)",
        use=use,
    )
    result = migrate_source(source, "train.py")
    assert [f for f in result.needs_review if f.code == "AM028"]


@pytest.mark.parametrize("use", [_ZIP, _RANGE, _BREAK], ids=["zip", "range", "break"])
@pytest.mark.parametrize("start, grow", _GROWTHS)
def test_grown_under_a_shared_test_its_length_is_shared(
    start: str, grow: str, use: str
) -> None:
    # a test every process takes alike: no decision to report
    assert _am028(start, "len(hard) < 3", grow, use) == []
