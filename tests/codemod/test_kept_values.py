"""Values handed to a method of the file's own class that keeps them in the
object (RAFT's ``Logger.push(metrics)``) are reported by AM009; and AM014 knows
an optimizer a function of the file builds and returns in a tuple (RAFT's
``optimizer, scheduler = fetch_optimizer(args, model)``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source

LOGGER = """
import torch
from torch.utils.data import DataLoader


class Logger:
    def __init__(self):
        self.total_steps = 0
        self.running_loss = {}

    def push(self, metrics):
        self.total_steps += 1
        for key in metrics:
            if key not in self.running_loss:
                self.running_loss[key] = 0.0
            self.running_loss[key] += metrics[key]
        if self.total_steps % 10 == 9:
            print({k: v / 10 for k, v in self.running_loss.items()})
            self.running_loss = {}

    def show(self, step):
        print("step", step)

    def set_input(self, batch):
        self.current = batch


model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=8)
logger = Logger()
for step, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    out = model(x)
    loss = torch.nn.functional.cross_entropy(out, y)
    loss.backward()
    optimizer.step()
    metrics = {"acc": (out.argmax(1) == y).float().mean().item()}
    logger.push(metrics)
    logger.show(step)
    logger.set_input(out.detach())
"""

SCALER = """
import torch
from torch.cuda.amp import GradScaler


def fetch_optimizer(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, 100)
    return optimizer, scheduler


model = torch.nn.Linear(4, 2)
optimizer, scheduler = fetch_optimizer(model)
scaler = GradScaler(enabled=False)
for x, y in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scheduler.step()
    scaler.update()
"""


def _migrate(tmp_path: Path, text: str):
    path = tmp_path / "train.py"
    path.write_text(text)
    return migrate_source(path.read_bytes(), str(path))


def test_a_keeping_method_of_the_files_class_is_reported(tmp_path: Path) -> None:
    result = _migrate(tmp_path, LOGGER)
    kept = [
        f for f in result.findings if f.code == "AM009" and "logger.push" in f.message
    ]
    assert len(kept) == 1 and kept[0].status == "needs-review"
    assert "keeps it in the object" in kept[0].message
    # left as written: what the object does with the values is not followed
    assert "logger.push(metrics)" in result.output.decode()  # type: ignore[union-attr]
    # `show` keeps nothing of what it is handed, `set_input` replaces what it
    # kept (pix2pix's current batch): neither is a collection
    assert not any("logger.show" in f.message for f in result.findings)
    assert not any("logger.set_input" in f.message for f in result.findings)


def test_an_optimizer_returned_in_a_tuple_is_one_for_the_scaler(tmp_path: Path) -> None:
    result = _migrate(tmp_path, SCALER)
    am014 = [f for f in result.findings if f.code == "AM014"]
    assert am014 and all(f.status == "fixed" for f in am014), [f.message for f in am014]
    out = result.output.decode()  # type: ignore[union-attr]
    assert "accel.grad_scaler(" in out and "accel.backward(loss)" in out
