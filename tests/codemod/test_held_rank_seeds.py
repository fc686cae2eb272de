"""AM046: a rank held in a variable and seeded with leaves the file unchanged,
naming the seed; the shapes around it keep what they did."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import os

import torch
import torch.distributed as dist

{setup}
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _findings(setup: str):
    result = migrate_source(SCRIPT.format(setup=setup).encode(), "t.py")
    return result, [f for f in result.findings if f.code == "AM046"]


@pytest.mark.parametrize(
    "setup",
    [
        "rank = dist.get_rank()\ntorch.manual_seed(7 + rank)",
        'rank = int(os.environ["RANK"])\nshift = rank * 3\ntorch.manual_seed(shift)',
        "r = dist.get_rank() if dist.is_initialized() else 0\ntorch.manual_seed(r)",
    ],
)
def test_held_rank_seed_leaves_the_file_whole(setup: str) -> None:
    result, found = _findings(setup)
    assert not result.changed
    assert len(found) == 1
    assert found[0].status == "needs-review"
    assert found[0].message.startswith("`torch.manual_seed(")
    assert "the file is left unchanged" in found[0].message
    # at the seed, not at the binding
    seed_line = 6 + setup.count("\n")
    assert found[0].line == seed_line


def test_direct_query_is_still_reported_where_it_is() -> None:
    """``torch.manual_seed(7 + dist.get_rank())``: the query's own finding,
    the file migrated as before (not a second finding at the seed)."""
    result, found = _findings("torch.manual_seed(7 + dist.get_rank())")
    assert result.changed
    assert len(found) == 1
    assert "the file is left unchanged" not in found[0].message


@pytest.mark.parametrize(
    "setup",
    [
        "seed = 7\ntorch.manual_seed(seed + 1)",
        'rank = int(os.environ.get("RANK", 0))\ntorch.manual_seed(7)\nprint(rank == 0)',
        "world = dist.get_world_size()\ntorch.manual_seed(7)",
    ],
)
def test_no_held_rank_no_seed_finding(setup: str) -> None:
    _, found = _findings(setup)
    assert not any("seeds with" in f.message for f in found)
