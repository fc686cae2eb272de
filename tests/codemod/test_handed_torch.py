"""A training file of a batch that names no torch module (an engine.py whose
step only calls the model, criterion and optimizer it is handed) is migrated
when the batch's other files hand it torch objects (``ProjectFacts.handed_torch``),
and left alone when they hand it none (a pure-Python autograd toy)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.findings import SKIP_NOT_TRAINING
from accel_migrate.codemod.project_view import ProjectView

ENGINE = """def train_one_epoch(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        print(loss.item())
"""

MAIN = """import torch
from torch.utils.data import DataLoader
from engine import train_one_epoch

model = torch.nn.Linear(4, 3)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(data, batch_size=8, shuffle=True)
train_one_epoch(model, loader, optimizer, torch.nn.CrossEntropyLoss())
"""

TOY = """from engine import train_one_epoch
from micrograd import MLP, SGD

net = MLP(2, [4, 1])
train_one_epoch(net, [(1.0, 2.0)], SGD(net.parameters()), lambda a, b: a - b)
"""


def _migrate(tmp_path: Path, caller: str):  # type: ignore[no-untyped-def]
    engine = tmp_path / "engine.py"
    main = tmp_path / "main.py"
    engine.write_text(ENGINE)
    main.write_text(caller)
    view = ProjectView([str(engine), str(main)])
    facts = view.facts_for(str(engine))
    return facts, migrate_source(
        engine.read_text(), str(engine), MigrateOptions(project=facts)
    )


def test_a_step_on_torch_objects_it_is_handed_is_migrated(tmp_path: Path) -> None:
    facts, result = _migrate(tmp_path, MAIN)
    assert facts.handed_torch
    assert result.skip_reason is None
    output = str(result.output)
    assert "accel.backward(loss)" in output
    assert "accel.print(" in output


def test_a_step_on_objects_of_no_torch_is_left_alone(tmp_path: Path) -> None:
    facts, result = _migrate(tmp_path, TOY)
    assert not facts.handed_torch
    assert result.skip_reason == SKIP_NOT_TRAINING
    assert result.output == ENGINE


def test_alone_it_is_not_a_training_entry_point(tmp_path: Path) -> None:
    engine = tmp_path / "engine.py"
    engine.write_text(ENGINE)
    result = migrate_source(ENGINE, str(engine))
    assert result.skip_reason == SKIP_NOT_TRAINING
