"""``reached_calls``: what a local function runs, its callees' calls included,
as AM028 asks it of a branch on the main process."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import accel_migrate.runtime as accel
import torch
from torch.utils.data import DataLoader

accel.device(accelerator=False)


def ping(n):
    if n:
        pong(n - 1)


def pong(n):
    ping(n)
    {inner}


model = accel.prepare_model(torch.nn.Linear(4, 1))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
loader = accel.prepare_dataloader(DataLoader(torch.randn(8, 4), batch_size=4))
for x in loader:
    optimizer.zero_grad()
    accel.backward(model(x).pow(2).mean())
    optimizer.step()
    if accel.is_main_process():
        ping(3)
"""


def _am028(inner: str) -> list[str]:
    result = migrate_source(SCRIPT.format(inner=inner), "train.py")
    return [f.message for f in result.findings if f.code == "AM028"]


def test_a_collective_two_calls_deep_through_recursion_is_found() -> None:
    found = _am028("accel.barrier()")
    assert len(found) == 1
    # named: the call in the branch, the function that runs the collective
    # (reached through `ping`), its line, and the fix
    assert (
        "decides whether `accel.barrier` runs: `ping(3)` leads to `pong`, whose "
        "`accel.barrier()` (line 15) is a collective" in found[0]
    )
    assert "call `accel.barrier` on every process, outside the branch" in found[0]


def test_a_collective_in_the_branch_itself_is_named() -> None:
    source = SCRIPT.format(inner="pass").replace(
        "        ping(3)", "        total = accel.reduce(x.sum())\n        print(total)"
    )
    result = migrate_source(source, "train.py")
    found = [f.message for f in result.findings if f.code == "AM028"]
    assert len(found) == 1
    assert "whether `accel.reduce` runs: `accel.reduce(x.sum())` is a collective" in (
        found[0]
    )
    assert "call `accel.reduce` on every process, above the branch" in found[0]


def test_a_state_dict_deep_in_the_calls_names_its_function() -> None:
    found = _am028('accel.save(accel.state_dict(model), "m.pt")')
    assert len(found) == 1
    assert "whether `accel.state_dict` runs (in `pong`, line 15" in found[0]


def test_calls_that_are_no_collective_are_not_reported() -> None:
    assert _am028('accel.print("pong")') == []
