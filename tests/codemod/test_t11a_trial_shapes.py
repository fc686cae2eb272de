"""Shapes of the t11a trial (harvardnlp's annotated-transformer, the DPO
repository's BasicTrainer): a stand-in Optimizer subclass, a loss unpacked
from a callable handed in as a parameter, a generator of batches over a
loader handed to the epoch function, and a helper module migrated for its
writes alone that came back unchanged (AM103)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.cli.whole_setups import keep_whole_setups
from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.findings import MigrationResult

RUN_EPOCH = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


class DummyOptimizer(torch.optim.Optimizer):
    def __init__(self):
        self.param_groups = [{"lr": 0}]

    def step(self):
        None

    def zero_grad(self, set_to_none=False):
        None


class RealOptimizer(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, {"lr": 0.1})


class Inherits(RealOptimizer):
    pass


class SimpleLossCompute:
    def __init__(self, generator, criterion):
        self.generator = generator
        self.criterion = criterion

    def __call__(self, x, y, norm):
        sloss = self.criterion(self.generator(x), y) / norm
        return sloss.data * norm, sloss


def run_epoch(data_iter, model, loss_compute, optimizer):
    total_loss = 0
    total_tokens = 0
    for i, batch in enumerate(data_iter):
        out = model(batch[0])
        loss, loss_node = loss_compute(out, batch[1], batch[2])
        loss_node.backward()
        optimizer.step()
        optimizer.zero_grad()
        total_loss += loss
        total_tokens += batch[2]
    return total_loss / total_tokens


model = nn.Linear(4, 4)
generator = nn.Linear(4, 3)
criterion = nn.NLLLoss(reduction="sum")
loader = DataLoader(data, batch_size=8)
valid_loader = DataLoader(valid, batch_size=8)
optimizer = torch.optim.Adam(model.parameters())
other = RealOptimizer(model.parameters())
inherited = Inherits(model.parameters())
run_epoch((b for b in loader), model, SimpleLossCompute(generator, criterion), optimizer)
valid_loss = run_epoch(
    (b for b in valid_loader), model, SimpleLossCompute(generator, criterion), DummyOptimizer()
)
print("valid loss", valid_loss)
"""


def _migrated(tmp_path: Path) -> tuple[str, MigrationResult]:
    script = tmp_path / "train.py"
    script.write_text(RUN_EPOCH)
    result = migrate_source(script.read_bytes(), str(script))
    return result.output.decode(), result  # type: ignore[union-attr]


def test_a_stand_in_optimizer_is_not_prepared(tmp_path: Path) -> None:
    out, _ = _migrated(tmp_path)
    # it never initialises its Optimizer base: no hooks, no state, nothing to step
    assert "DummyOptimizer()\n" in out
    assert "prepare_optimizer(DummyOptimizer())" not in out
    # subclasses that initialise it (themselves or through a local base) are
    assert "other = accel.prepare_optimizer(RealOptimizer(model.parameters()))" in out
    assert "inherited = accel.prepare_optimizer(Inherits(model.parameters()))" in out


def test_a_loss_from_a_handed_callable_is_of_unknown_reduction(tmp_path: Path) -> None:
    out, result = _migrated(tmp_path)
    assert "accel.backward(loss_node)" in out
    [finding] = [f for f in result.findings if f.code == "AM007"]
    assert finding.status == "needs-review"
    assert "`loss_compute`, a callable handed to `run_epoch` as a parameter" in (
        finding.message
    )


def test_sums_over_a_generator_of_loader_batches_are_per_process(
    tmp_path: Path,
) -> None:
    _, result = _migrated(tmp_path)
    flagged = {
        f.message.split("`")[1]
        for f in result.findings
        if f.code == "AM009" and f.status == "needs-review"
    }
    assert {"total_loss", "total_tokens"} <= flagged


def _result(path: str, changed: bool, findings: tuple = ()) -> MigrationResult:
    source = b"x = 1\n"
    return MigrationResult(
        path, source, source + (b"y\n" if changed else b""), findings
    )


def test_an_unchanged_helper_migrated_for_its_writes_leaves_its_importer_migrated() -> (
    None
):
    # main.py (0) imports utils.py (1), migrated for its callers because a
    # helper of it writes files (os.makedirs(exist_ok=True)): it came back
    # unchanged with no finding, and no caller hands it a loader
    outcomes = [_result("main.py", True), _result("utils.py", False)]
    imports = {0: {1: 3}}
    kept = keep_whole_setups(
        ["main.py", "utils.py"], outcomes, imports, frozenset({1}), frozenset()
    )
    assert kept[0] is outcomes[0]
    # handed a loader, it may sum this process's share over it: left whole
    kept = keep_whole_setups(
        ["main.py", "utils.py"], outcomes, imports, frozenset({1}), frozenset({1})
    )
    assert kept[0].output == kept[0].source  # type: ignore[union-attr]
    assert kept[0].findings[0].code == "AM103"  # type: ignore[union-attr]
    assert "hands its sharded loaders" in kept[0].findings[0].message  # type: ignore[union-attr]


MODEL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class GPT(nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.head = nn.Linear(n, n)

    @classmethod
    def from_pretrained(cls, n, seed=0):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = cls(n)
        return model

    @classmethod
    def config_of(cls, name):
        return {"n": 4}

    def forward(self, x, targets=None):
        logits = self.head(x)
        return logits, F.cross_entropy(logits, targets, ignore_index=-1)
"""

FINETUNE = """import torch
from torch.utils.data import DataLoader
from model import GPT

model = GPT.from_pretrained(4)
config = GPT.config_of("tiny")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for x, y in DataLoader(data, batch_size=8, shuffle=True):
    logits, loss = model(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_class_method_that_builds_the_model_is_a_model(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    script = tmp_path / "finetune.py"
    script.write_text(FINETUNE)
    result = migrate_source(script.read_bytes(), str(script))
    out = result.output.decode()  # type: ignore[union-attr]
    assert "model = accel.prepare_model(GPT.from_pretrained(4))" in out
    # a class method handing back something else is no model
    assert 'config = GPT.config_of("tiny")' in out
    # the loss of its forward keeps its reduction (a mean over targets != -1)
    assert "accel.backward(loss, count=(y != -1).sum())" in out
