"""A review's reproductions (rev19b) of readings the divergence analysis gained
this session and that let a loop only some processes run go unreported: each
was AM028 before the change, migrated with no finding after it, and hung at two
processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.codemod.engine import migrate_source

HEAD = """\
import random

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

task_w = torch.randn(5, 6)
loader = DataLoader(TensorDataset(torch.randn(32, 6)), batch_size=8)
net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.1)


def step(x, t):
    y = (x @ task_w[t] > 0).long()
    opt.zero_grad()
    F.cross_entropy(net(x), y).backward()
    opt.step()
"""


def _review_codes(source: str) -> list[str]:
    result = migrate_source(source, "train.py")
    return [f.code for f in result.findings if f.status == "needs-review"]


def test_a_draw_whose_count_a_caller_computes_from_its_share_is_rank_local() -> None:
    """`def rounds(k): for t in random.sample(range(5), k)` with `k` from the
    process's batch: the divergence walk's taint reaches a parameter only where
    a caller passes the rank, so the count looked the same everywhere."""
    source = HEAD + (
        "\n\ndef rounds(k):\n"
        "    for t in random.sample(range(5), k):\n"
        "        for (x,) in loader:\n"
        "            step(x, t)\n\n\n"
        "for (x,) in loader:\n"
        "    n = 1 + int(x[0, 0] > 0)\n"
        "rounds(n)\n"
    )
    assert "AM028" in _review_codes(source)


def test_a_count_rebound_by_a_loop_between_draw_and_loop_is_rank_local() -> None:
    source = HEAD + (
        "\nfor (x,) in loader:\n"
        "    k = 1 + int(x[0, 0] > 0)\n"
        "idx = random.sample(range(5), k)\n"
        "for k in range(1):\n"
        "    pass\n"
        "for t in idx:\n"
        "    for (x,) in loader:\n"
        "        step(x, t)\n"
    )
    assert "AM028" in _review_codes(source)


def test_a_list_imported_from_the_project_and_grown_on_some_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`from store import HARD`; `HARD.append(...)` under a test of the
    process's loss; `while HARD:` one step per item: the imported name was
    taken for a module's function and not bound."""
    (tmp_path / "store.py").write_text("HARD = []\n")
    script = tmp_path / "train.py"
    script.write_text(
        HEAD.replace("import random\n", "import random\n\nfrom store import HARD\n")
        + (
            "\nfor (x,) in loader:\n"
            "    loss = F.cross_entropy(net(x), (x[:, 0] > 0).long())\n"
            "    if loss.item() > 0.7:\n"
            "        HARD.append(1.0)\n"
            "while HARD:\n"
            "    HARD.pop()\n"
            "    for (x,) in loader:\n"
            "        step(x, 0)\n"
        )
    )
    main(["--no-cache", "--output-format", "json", str(script)])
    report = json.loads(capsys.readouterr().out)
    codes = [
        f["code"]
        for e in report["files"]
        for f in e["findings"]
        if f["status"] == "needs-review"
    ]
    assert "AM028" in codes, report
