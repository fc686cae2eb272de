"""Criterion factories of a local module (``criterion_factories``): the
reduction of the loss modules a function returns, read where its result is
backpropagated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.codemod.project_view import ProjectView

LOSSES = """\
from torch import nn


def summing(name):
    if name == "l1":
        return nn.L1Loss(reduction="sum")
    return nn.MSELoss(size_average=False).cuda()


def averaging():
    return nn.MSELoss()


def unread(avg, **kw):
    if avg:
        return nn.MSELoss(**kw)
    return nn.L1Loss(size_average=avg)


def mixed(name):
    if name == "l1":
        return nn.L1Loss(reduction="sum")
    return nn.MSELoss()


def not_a_factory(x):
    return x * 2
"""

SCRIPT = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from losses import {factory}

data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
loader = DataLoader(data, batch_size=4, shuffle=True)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = {factory}("l2")
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _write(tmp_path: Path, factory: str) -> Path:
    (tmp_path / "losses.py").write_text(LOSSES)
    script = tmp_path / "train.py"
    script.write_text(
        SCRIPT.format(factory=factory).replace('averaging("l2")', "averaging()")
    )
    return script


def test_the_view_reads_what_each_factory_returns(tmp_path: Path) -> None:
    script = _write(tmp_path, "summing")
    script.write_text(
        "from losses import summing, averaging, mixed, unread, not_a_factory\n"
    )
    facts = dict(ProjectView([str(script)]).facts_for(str(script)).helpers)
    assert facts["losses.summing"].criterion == "sum"
    assert facts["losses.averaging"].criterion == "mean"
    assert facts["losses.mixed"].criterion == "unknown"
    assert facts["losses.not_a_factory"].criterion == ""
    # settings unpacked or computed are not read as a mean (rev19a)
    assert facts["losses.unread"].criterion == "unknown"


def _migrate(
    tmp_path: Path, factory: str, capsys: pytest.CaptureFixture[str]
) -> tuple[str, list[dict]]:
    script = _write(tmp_path, factory)
    main(["--write", "--no-cache", "--output-format", "json", str(script)])
    report = json.loads(capsys.readouterr().out)
    return script.read_text(), [f for e in report["files"] for f in e["findings"]]


def test_a_summing_factory_s_criterion_is_backpropagated_as_a_sum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as a mean before: half the gradient at two processes, no finding."""
    text, _ = _migrate(tmp_path, "summing", capsys)
    assert 'accel.backward(loss, reduction="sum")' in text


def test_an_averaging_factory_s_criterion_is_a_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, findings = _migrate(tmp_path, "averaging", capsys)
    assert "accel.backward(loss)\n" in text
    assert not [f for f in findings if f["status"] == "needs-review"]


def test_a_factory_whose_branches_differ_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _text, findings = _migrate(tmp_path, "mixed", capsys)
    assert any(
        f["code"] == "AM007"
        and f["status"] == "needs-review"
        and "losses.py" in f["message"]
        for f in findings
    ), findings


def test_a_factory_s_criterion_whose_setting_is_written_after_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`criterion = averaging(); criterion.reduction = "sum"` (rev19a's F4)."""
    script = _write(tmp_path, "averaging")
    text = script.read_text().replace(
        "criterion = averaging()\n",
        'criterion = averaging()\ncriterion.reduction = "sum"\n',
    )
    script.write_text(text)
    main(["--write", "--no-cache", "--output-format", "json", str(script)])
    report = json.loads(capsys.readouterr().out)
    findings = [f for e in report["files"] for f in e["findings"]]
    assert any(
        f["code"] == "AM007" and f["status"] == "needs-review" for f in findings
    ), findings
