"""No collective goes where a test of the file system that the run's own
writes may change decides whether the code runs (``file_tests.racy_file_test``,
asked by ``ModuleIndex.uniform``): a metric sum there is needs-review naming
the test, and a loader every loop of which runs under such a test is left
whole. A resume branch where the script starts, which writes nothing, sees the
files every process started with: a collective there is placed as before. And
AM025 reads the batch size of a loader factory of another module through the
parameter its DataLoader takes it from (``loader_factory_sizes``)."""

from __future__ import annotations

import ast
from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.loader_factory_sizes import batch_size_parameter

HEAD = """\
import os

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

x = torch.randn(32, 4)
y = (x[:, 0] > 0).long()
train_loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
val_loader = DataLoader(TensorDataset(x, y), batch_size=8)
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def validate():
    correct = 0
    for xb, yb in val_loader:
        correct += (model(xb).argmax(1) == yb).sum().item()
    return correct


"""

TRAIN = """\
for xb, yb in train_loader:
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _migrate(tmp_path: Path, source: str) -> tuple[str, list[str]]:
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    return result.output, [f"{f.code} {f.status} {f.message}" for f in result.findings]


def test_resume_branch_at_start_keeps_its_reduction(tmp_path: Path) -> None:
    source = (
        HEAD
        + 'if os.path.isfile("resume.pt"):\n'
        + '    model.load_state_dict(torch.load("resume.pt"))\n'
        + '    print("resumed", validate())\n'
        + TRAIN
        + 'print("val", validate())\n'
    )
    out, findings = _migrate(tmp_path, source)
    assert "correct = accel.reduce(correct)" in out
    assert "val_loader = accel.prepare_dataloader(" in out
    assert not any("test of the file system" in f for f in findings), findings


def test_sum_under_a_test_of_a_file_the_run_writes(tmp_path: Path) -> None:
    source = (
        HEAD
        + TRAIN
        + 'torch.save(model.state_dict(), "last.pt")\n'
        + 'print("val", validate())\n'
        + 'if os.path.exists("last.pt"):\n'
        + "    total = 0\n"
        + "    for xb, yb in val_loader:\n"
        + "        total += F.cross_entropy(model(xb), yb).item()\n"
        + '    print("eval", total)\n'
    )
    out, findings = _migrate(tmp_path, source)
    assert "total = accel.reduce(total)" not in out
    assert "correct = accel.reduce(correct)" in out  # validate(): every process
    (finding,) = [f for f in findings if f.startswith("AM009 needs-review")]
    line = source.splitlines().index('if os.path.exists("last.pt"):') + 1
    assert f"the test of the file system at line {line}" in finding
    assert 'os.path.exists("last.pt")' in finding


def test_loader_read_only_under_a_racy_test_is_left_whole(tmp_path: Path) -> None:
    source = (
        HEAD.replace("val_loader", "test_loader").split("def validate")[0]
        + TRAIN
        + 'torch.save(model.state_dict(), "last.pt")\n'
        + 'if os.path.exists("last.pt"):\n'
        + "    total = 0\n"
        + "    for xb, yb in test_loader:\n"
        + "        total += F.cross_entropy(model(xb), yb).item()\n"
        + '    print("eval", total)\n'
    )
    out, findings = _migrate(tmp_path, source)
    assert "test_loader = DataLoader(" in out
    assert "accel.reduce" not in out
    assert any(
        f.startswith("AM006 needs-review every loop over this loader runs only")
        for f in findings
    ), findings


def _function(source: str) -> ast.FunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def _dotted(expr: ast.expr) -> str:
    return "torch.utils.data.DataLoader" if ast.unparse(expr) == "DataLoader" else ""


def test_factory_batch_size_parameter() -> None:
    direct = "def get(ds, batch_size, workers=0):\n    return DataLoader(ds, batch_size=batch_size)\n"
    assert batch_size_parameter(_function(direct), _dotted) == ("batch_size", 1)
    bound = "def get(ds, *, bs):\n    loader = DataLoader(ds, bs)\n    return loader\n"
    assert batch_size_parameter(_function(bound), _dotted) == ("bs", -1)
    halved = (
        "def get(ds, bs):\n    bs = bs // 2\n    return DataLoader(ds, batch_size=bs)\n"
    )
    assert batch_size_parameter(_function(halved), _dotted) == ("", -1)
    literal = "def get(ds):\n    return DataLoader(ds, batch_size=32)\n"
    assert batch_size_parameter(_function(literal), _dotted) == ("", -1)
