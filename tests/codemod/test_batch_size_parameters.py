"""AM025 with the batch size handed down as a parameter (``train(model, loader,
args.batch_size)``); fixtures/batch_size_shapes/batch_size_parameter is the golden."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.findings import Finding

SOURCE = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

BATCH = 8


def step(model, optimizer, loader, batch_size):
    for x, y in loader:
        x = x.view(batch_size, -1)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


loader = DataLoader(TensorDataset(torch.randn(32, 2, 2), torch.randn(32, 1)), batch_size=BATCH)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
step(model, optimizer, loader, BATCH)
"""


def _am025(source: str) -> list[Finding]:
    return [f for f in migrate_source(source, "train.py").findings if f.code == "AM025"]


def test_the_loaders_batch_size_at_every_call_is_rewritten_to_the_batchs_size() -> None:
    result = migrate_source(SOURCE, "train.py")
    assert "x = x.view(x.size(0), -1)" in result.output
    (finding,) = _am025(SOURCE)
    assert (finding.line, finding.status) == (9, "fixed")


def test_a_literal_equal_to_the_loaders_literal_batch_size_is_the_same_value() -> None:
    source = SOURCE.replace("batch_size=BATCH)", "batch_size=8)").replace(
        "loader, BATCH)", "loader, 8)"
    )
    assert "x = x.view(x.size(0), -1)" in migrate_source(source, "train.py").output


def test_a_call_that_passes_another_value_is_reported_with_its_line() -> None:
    source = SOURCE + "step(model, optimizer, loader, 4)\n"
    result = migrate_source(source, "train.py")
    assert "x = x.view(batch_size, -1)" in result.output
    (finding,) = _am025(source)
    assert (finding.line, finding.status) == (9, "needs-review")
    assert finding.message.startswith(
        "`batch_size` (a parameter of `step()`: line 18 passes `BATCH`; line 19 "
        "passes `4`), the loader's batch size at a call, is used as a shape in a step"
    )
    assert "--batch-mode per-device" in finding.message


def test_a_parameter_rebound_in_the_function_is_not_followed() -> None:
    source = SOURCE.replace(
        "    for x, y in loader:\n",
        "    batch_size = batch_size * 2\n    for x, y in loader:\n",
    )
    result = migrate_source(source, "train.py")
    assert "x = x.view(batch_size, -1)" in result.output
    assert _am025(source) == []
