"""AM019 for a generator of batches from another module
(``iterator_factories.generated_batches``): ``for xb, yb in get_batches(x, y,
8)`` slices the data every process holds, whole; a generator that hands on
the batches of a loader it is handed is not one."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

UTILS = """
import torch


def get_batches(x, y, batch_size, shuffle=True):
    n = len(x)
    index = torch.randperm(n) if shuffle else torch.arange(n)
    for start in range(0, n, batch_size):
        idx = index[start:start + batch_size]
        yield x[idx], y[idx]


def shifted(loader):
    for x, y in loader:
        yield x[:, :-1], y


def data_iter(data, batch_size, shuffle=True):
    indices = list(range(len(data)))
    for start in range(0, len(indices), batch_size):
        batch = [data[i] for i in indices[start:start + batch_size]]
        src, tgt = zip(*batch)
        yield torch.stack(src), torch.stack(tgt)


def relabelled(loader, names):
    for batch in loader:
        labels = [names[i] for i in batch[1]]
        yield batch[0], labels


def forever(loader):
    while True:
        for batch in loader:
            yield batch
"""

SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from utils import get_batches, shifted, forever, data_iter, relabelled

x = torch.randn(64, 4)
y = torch.randn(64, 1)
model = torch.nn.Linear(4, 1).to("cpu")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(x, y), batch_size=8)
for epoch in range(2):
    for xb, yb in {source}:
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def _am019(tmp_path: Path, source: str) -> list[str]:
    (tmp_path / "utils.py").write_text(UTILS)
    script = tmp_path / "train.py"
    text = SCRIPT.format(source=source)
    script.write_text(text)
    result = migrate_source(text, str(script), MigrateOptions())
    return [
        f"{f.line}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
        if f.code == "AM019"
    ]


def test_the_view_names_a_generator_of_batches(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "train.py").write_text("import utils\n")
    facts = dict(read_project(str(tmp_path / "train.py")).helpers)
    assert (
        "a generator that yields batches" in facts["utils.get_batches"].batch_iterator
    )
    assert facts["utils.shifted"].batch_iterator == ""
    assert facts["utils.forever"].batch_iterator == ""
    # pytorch_nmt's data_iter: items indexed out of its data, through names
    assert "a generator that yields" in facts["utils.data_iter"].batch_iterator
    # a loop over the loader it is handed, indexing another parameter
    assert facts["utils.relabelled"].batch_iterator == ""


def test_a_loop_over_a_generator_of_batches_is_reported(tmp_path: Path) -> None:
    found = _am019(tmp_path, "get_batches(x, y, 8)")
    assert len(found) == 1, found
    assert found[0].startswith("12: AM019 [needs-review] the loop over `get_batches")
    assert "`get_batches` of utils.py, a generator that yields batches" in found[0]
    assert "not split across processes" in found[0]


def test_a_loop_over_a_generator_of_indexed_items_is_reported(tmp_path: Path) -> None:
    found = _am019(tmp_path, "data_iter(list(zip(x, y)), 8)")
    assert len(found) == 1, found
    assert "`data_iter` of utils.py, a generator that yields batches" in found[0]


@pytest.mark.parametrize(
    "source", ["shifted(loader)", "forever(loader)", "relabelled(loader, {})"]
)
def test_a_generator_over_a_loader_is_not_reported(tmp_path: Path, source: str) -> None:
    assert _am019(tmp_path, source) == []
