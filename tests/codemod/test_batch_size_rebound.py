"""AM025 reads a batch-size name the step rebinds before the use: under ``if i
== 0:`` of the loop's own enumerate counter the rebinding holds from the first
step on (not reported); under a branch it cannot show runs first, it may not
have run (still reported). Two shapes made with the batch size on one line are
one finding."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

LOOP = """
import torch
from torch.utils.data import DataLoader

batch_size = 64
full = batch_size
warmup = False
loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(3):
    for {target} in {iterable}:
{before}        if {test}:
            batch_size = real.size(0)
        label = torch.full((batch_size,), 1.0)
        loss = torch.nn.functional.mse_loss(model(real).view(-1), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
{end}"""


def _am025(source: str) -> list[tuple[int, str]]:
    result = migrate_source(source, "train.py")
    return [
        (f.line, f.message)
        for f in result.findings
        if f.code == "AM025" and f.status == "needs-review"
    ]


def _loop(
    test: str = "i == 0",
    target: str = "i, (real, _)",
    iterable: str = "enumerate(loader)",
    before: str = "",
    end: str = "",
) -> str:
    return LOOP.format(
        test=test,
        target=target,
        iterable=iterable,
        before=before,
        end=end,
    )


@pytest.mark.parametrize("test", ["i == 0", "0 == i", "not i"])
def test_a_rebinding_at_the_first_step_holds_from_then_on(test: str) -> None:
    assert _am025(_loop(test=test)) == []
    assert _am025(_loop(iterable="enumerate(loader, 0)")) == []


@pytest.mark.parametrize(
    "variant",
    [
        {"test": "epoch > 0"},  # not run in the first epoch
        {"test": "i == 1"},  # not the first step
        {"iterable": "enumerate(loader, 1)"},  # the counter starts at 1
        {"test": "epoch == 0", "target": "(real, _)", "iterable": "loader"},
        {
            "before": "        if warmup and i == 0:\n            continue\n"
        },  # may skip it
        {"end": "        batch_size = full\n"},  # set back to the configured size
    ],
)
def test_a_rebinding_the_rule_cannot_show_runs_first_is_reported(
    variant: dict[str, str],
) -> None:
    source = _loop(**variant)
    findings = _am025(source)
    assert len(findings) == 1, findings
    assert "the loader's batch size `batch_size` is used as a shape" in findings[0][1]


SAME_LINE = """
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

B = args.batch_size
loader = DataLoader(dataset, batch_size=args.batch_size, drop_last=True)
model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters())
for x1, x2 in loader:
    z = torch.cat([model(x1), model(x2)])
    labels = torch.cat([torch.arange(B) + B, torch.arange(B)])
    mask = torch.eye(2 * B, dtype=torch.bool) | torch.zeros(B, B).bool().repeat(2, 2)
    loss = F.cross_entropy((z @ z.t()).masked_fill(mask, -1e9), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_shapes_on_one_line_are_one_finding() -> None:
    """Before, each `torch.arange(B)` of a line was a finding of its own."""
    findings = _am025(SAME_LINE)
    assert [line for line, _ in findings] == [12, 13]
    assert findings[0][1].startswith("the loader's batch size `B` is used as a shape")
    assert findings[1][1].startswith("`2 * B`, a multiple of the loader's batch size,")
