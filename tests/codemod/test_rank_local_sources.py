"""The provenance of rank-local values (``rank_local_sources``): which clock read,
draw or loader makes a value differ between processes, and the variables in
between, as AM028's findings name them (issue 12, r27b)."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.analysis import ModuleIndex

# PointNet's train_classification.py: the log folder is named from the clock,
# the checkpoint read from it decides the first epoch.
POINTNET = """import datetime
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

timestr = str(datetime.datetime.now().strftime("%Y-%m-%d_%H-%M"))
exp_dir = Path("./log/").joinpath(timestr)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)
try:
    checkpoint = torch.load(str(exp_dir) + "/best_model.pth")
    start_epoch = checkpoint["epoch"]
except FileNotFoundError:
    start_epoch = 0
for epoch in range(start_epoch, 3):
    for (x,) in loader:
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
"""


def _index(source: str) -> ModuleIndex:
    return ModuleIndex(MetadataWrapper(cst.parse_module(source)), "accel")


def _epoch_loop(index: ModuleIndex) -> cst.For:
    return next(
        f
        for f in index.for_loops
        if cst.Module([]).code_for_node(f.iter).startswith("range")
    )


def test_a_folder_named_from_the_clock_is_the_named_source() -> None:
    index = _index(POINTNET)
    provenance = index.rank_local_sources.of(_epoch_loop(index).iter)
    assert "clock" in provenance.kinds and "exception" in provenance.kinds
    first = index.rank_local_sources.first(_epoch_loop(index).iter)
    assert first is not None and first.kind == "clock"
    assert cst.Module([]).code_for_node(first.node) == "datetime.datetime.now()"
    assert first.through == ("start_epoch", "checkpoint", "exp_dir", "timestr")


def test_am028_names_the_clock_read_and_its_line() -> None:
    result = migrate_source(POINTNET, "train.py")
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert "`datetime.datetime.now()` at line 8" in finding.message
    assert "each process reads its own clock" in finding.message
    assert "accel.reduce" not in finding.message  # not the fix for a clock


def test_draws_and_data_are_told_apart() -> None:
    index = _index(
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)\n"
        "kept = []\n"
        "for (x,) in loader:\n"
        "    noise = torch.rand(1)\n"
        "    if noise.item() > 0.5:\n"
        "        kept.append(noise)\n"
        "    if x.max() > 2:\n"
        "        kept.append(x)\n"
        "drawn = [n for n in kept]\n"
    )
    ifs = [n for f in index.for_loops for n in f.body.body if isinstance(n, cst.If)]
    draw_test, data_test = ifs[0].test, ifs[1].test
    assert index.rank_local_sources.of(draw_test).kinds == {"random"}
    assert index.rank_local_sources.of(data_test).kinds == {"data"}
    kept = index.module.body[-1].body[0].value  # type: ignore[attr-defined]
    assert index.rank_local_sources.of(kept).kinds == {"random", "data"}
    assert index.rank_local_sources.of(kept).complete


def test_the_step_counter_of_a_sharded_loader_is_no_source() -> None:
    index = _index(
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)\n"
        "total = 0\n"
        "for i, (x,) in enumerate(loader):\n"
        "    total += x.size(0)\n"
        "    if i >= 2 or total > 100:\n"
        "        break\n"
    )
    (loop,) = index.for_loops
    test = loop.body.body[1].test  # type: ignore[attr-defined]
    sources = index.rank_local_sources
    counter_only = test.left  # `i >= 2`
    assert sources.of(counter_only).sources == []
    assert sources.of(counter_only).complete
    first = sources.first(test)
    assert first is not None and first.kind == "data"
    assert first.through == ("total", "x")


def test_a_rebinding_hides_the_earlier_draws() -> None:
    index = _index(
        "import numpy as np\n"
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)\n"
        "for (x,) in loader:\n"
        "    pass\n"
        "n = int(np.random.normal(70, 5))\n"
        "n = int(np.random.normal(35, 5))\n"
        "if n > 40:\n"
        "    n = int(np.random.normal(10, 1))\n"
        "else:\n"
        "    n = int(np.random.normal(20, 1))\n"
        "m = n\n"
        "k = n * 2\n"
    )
    sources = index.rank_local_sources
    code = cst.Module([]).code_for_node
    m_value = index.module.body[-2].body[0].value  # type: ignore[attr-defined]
    found = [code(s.node) for s in sources.of(m_value).sources]
    # the arms' draws, then the test they are set under; not the first draw
    assert found == [
        "np.random.normal(10, 1)",
        "np.random.normal(20, 1)",
        "np.random.normal(35, 5)",
    ]
    test = index.module.body[-3].test  # type: ignore[attr-defined]
    assert [code(s.node) for s in sources.of(test).sources] == [
        "np.random.normal(35, 5)"
    ]


def test_a_call_between_may_rebind_a_global() -> None:
    index = _index(
        "import numpy as np\n"
        "import torch\n"
        "from torch.utils.data import DataLoader, TensorDataset\n"
        "loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)\n"
        "for (x,) in loader:\n"
        "    pass\n"
        "def redraw():\n"
        "    global n\n"
        "    n = int(np.random.normal(35, 5))\n"
        "n = 70\n"
        "redraw()\n"
        "m = n\n"
    )
    m_value = index.module.body[-1].body[0].value  # type: ignore[attr-defined]
    found = index.rank_local_sources.of(m_value).sources
    code = cst.Module([]).code_for_node
    assert [code(s.node) for s in found] == ["np.random.normal(35, 5)"]


# ganomaly's test(): a dict of a clock-timed entry and the AUC; the checkpoint
# is chosen on the AUC entry, whose source is the data, not the clock.
TIMED_METRICS = """import time
from collections import OrderedDict

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)


def test():
    start = time.time()
    for (x,) in loader:
        score = model(x).max().item()
    return OrderedDict([("Run Time", time.time() - start), ("AUC", score)])


best = 0.0
for epoch in range(3):
    for (x,) in loader:
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
    res = test()
    if res["AUC"] > best:
        best = res["AUC"]
        torch.save(model.state_dict(), "best.pt")
"""


def test_an_entry_read_by_its_key_is_followed_as_that_entry() -> None:
    result = migrate_source(TIMED_METRICS, "train.py")
    (finding,) = [f for f in result.findings if f.code == "AM028"]
    assert '`res["AUC"] > best`' in finding.message
    assert "clock" not in finding.message  # the "Run Time" entry is not read
    assert "`score`" in finding.message and "share of the data" in finding.message


def test_the_other_entries_of_the_dict_are_no_source() -> None:
    index = _index(TIMED_METRICS)
    test = next(
        i.test
        for i in index.module.body
        if isinstance(i, cst.For)
        for i in i.body.body
        if isinstance(i, cst.If)
    )
    assert index.rank_local_sources.of(test).kinds == {"data"}  # not the clock
