"""A loss computed by a criterion class of the script (``reduction.local_criteria``):
its forward's returns decide the reduction the backward is told, a branch on a
setting every construction fixes is followed, and one it cannot follow makes the
reduction unknown (needs-review), never the mean every torch loss defaults to."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

FOCAL = (
    "class FocalLoss(nn.Module):\n"
    "    def __init__(self, gamma=0.0, size_average=True, reduction='mean'):\n"
    "        super().__init__()\n"
    "        self.gamma = gamma\n"
    "        self.size_average = size_average\n"
    "        self.reduction = reduction\n"
    "    def forward(self, input, target):\n"
    "        logpt = F.log_softmax(input, dim=1).gather(1, target.view(-1, 1)).view(-1)\n"
    "        loss = -1 * (1 - logpt.exp()) ** self.gamma * logpt\n"
    "{body}"
)
SIZE_AVERAGE = (
    "        if self.size_average:\n"
    "            return loss.mean()\n"
    "        else:\n"
    "            return loss.sum()\n"
)
REDUCTION = (
    "        if self.reduction == 'mean':\n"
    "            return loss.mean()\n"
    "        elif self.reduction == 'sum':\n"
    "            return loss.sum()\n"
    "        return loss\n"
)


def _migrate(body: str, built: str) -> tuple[str, str, str]:
    source = (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "from torch.utils.data import DataLoader\n"
        + FOCAL.format(body=body)
        + "model = nn.Linear(4, 3)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loader = DataLoader(list(range(8)), batch_size=4)\n"
        f"criterion = {built}\n"
        "for x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
    )
    result = migrate_source(source, "train.py")
    line = next(
        t.strip() for t in str(result.output).splitlines() if "accel.backward(" in t
    )
    finding = next(f for f in result.findings if f.code == "AM007")
    return line, finding.status, finding.message


@pytest.mark.parametrize(
    ("body", "built", "told"),
    [
        (SIZE_AVERAGE, "FocalLoss(gamma=2.0, size_average=False)", 'reduction="sum"'),
        (SIZE_AVERAGE, "FocalLoss(2.0, False)", 'reduction="sum"'),
        (SIZE_AVERAGE, "FocalLoss(gamma=2.0)", "accel.backward(loss)"),
        (REDUCTION, "FocalLoss(reduction='sum')", 'reduction="sum"'),
        (REDUCTION, "FocalLoss(reduction='mean').to('cpu')", "accel.backward(loss)"),
        ("        return loss.sum()\n", "FocalLoss()", 'reduction="sum"'),
        (
            "        return loss.mean() if self.size_average else loss.sum()\n",
            "FocalLoss(size_average=False)",
            'reduction="sum"',
        ),
    ],
)
def test_the_reached_return_decides(body: str, built: str, told: str) -> None:
    line, status, _ = _migrate(body, built)
    assert told in line
    assert status == "fixed"


@pytest.mark.parametrize(
    "built",
    [
        "FocalLoss(gamma=2.0, size_average=args_size_average)",  # not a literal
        "FocalLoss(**opts)",
    ],
)
def test_a_branch_it_cannot_follow_is_not_taken_as_a_mean(built: str) -> None:
    # was told nothing (a mean over samples) for a summed focal loss: SILENT
    line, status, message = _migrate(SIZE_AVERAGE, built)
    assert status == "needs-review"
    assert "`criterion` is a `FocalLoss` (this file)" in message
    assert "different reductions (mean, sum)" in message
    assert "reduction=" not in line


def test_a_setting_changed_after_init_is_not_followed() -> None:
    body = "        self.size_average = True\n" + SIZE_AVERAGE
    _, status, message = _migrate(body, "FocalLoss(size_average=False)")
    assert status == "needs-review"
    assert "different reductions" in message


def test_a_model_class_says_nothing() -> None:
    body = "        return self.gamma * input\n"
    line, status, _ = _migrate(body, "FocalLoss()")
    assert line == "accel.backward(loss)"
    assert status == "fixed"
