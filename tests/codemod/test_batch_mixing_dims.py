"""AM037: the dimension a training step's batch is rolled or flipped along,
when it is not a plain non-negative integer.

- a negative dimension ``-k`` is dimension 0 of a ``k``-dimensional tensor
  (``torch.roll(images, 1, dims=-4)`` of a batch of images): reported, with
  the condition;
- a dimension the code does not give (a parameter, an option): reported, as
  it cannot be proven not the batch's;
- a name bound only to integers is read as them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source

STEP = """\
import argparse

import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--dim", type=int, default=1)
args = parser.parse_args()
SHIFT_DIM = {constant}
model = torch.nn.Conv2d(3, 3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.randn(8, 3, 4, 4), batch_size=4)
for images in loader:
    pair = {moved}
    loss = (model(pair) - model(images)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _findings(tmp_path: Path, moved: str, constant: str = "1") -> list[str]:
    source = STEP.format(constant=constant, moved=moved)
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    return [
        f"{f.code} {f.status} {f.message}"
        for f in result.findings
        if "moves values between the samples" in f.message
    ]


@pytest.mark.parametrize(
    "moved, constant, condition",
    [
        ("torch.roll(images, 1, dims=-4)", "1", "tensor with 4 dimensions"),
        ("images.roll(1, -4)", "1", "tensor with 4 dimensions"),
        ("torch.flip(images, [-4])", "1", "tensor with 4 dimensions"),
        ("torch.roll(images, 1, dims=SHIFT_DIM)", "-4", "tensor with 4 dimensions"),
        ("torch.roll(images, 1, dims=(1, -3))", "1", "tensor with 3 dimensions"),
        ("torch.roll(images, 1, dims=args.dim)", "1", "`args.dim` cannot be read"),
        ("images.flip(args.dim)", "1", "`args.dim` cannot be read"),
    ],
)
def test_a_dimension_that_may_be_the_batch_is_reported(
    tmp_path: Path, moved: str, constant: str, condition: str
) -> None:
    findings = _findings(tmp_path, moved, constant)
    assert len(findings) == 1, findings
    assert findings[0].startswith("AM037 needs-review")
    assert condition in findings[0], findings[0]


@pytest.mark.parametrize(
    "moved, constant",
    [
        ("torch.roll(images, 1, dims=SHIFT_DIM)", "2"),
        ("torch.roll(images, 1, dims=(1, 2))", "1"),
        ("images.flip(3)", "1"),
    ],
)
def test_a_dimension_read_as_not_the_first_is_not_reported(
    tmp_path: Path, moved: str, constant: str
) -> None:
    assert _findings(tmp_path, moved, constant) == []


def test_dimension_zero_reports_no_condition(tmp_path: Path) -> None:
    findings = _findings(tmp_path, "torch.roll(images, 1, dims=SHIFT_DIM)", "0")
    assert len(findings) == 1
    assert "cannot be proven" not in findings[0]
