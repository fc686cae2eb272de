"""A trained ``nn.ModuleList`` / ``nn.ModuleDict`` (RepDistiller's
``trainable_list = nn.ModuleList([])`` filled with ``.append(model_s)``, the
optimizer over ``trainable_list.parameters()``, the step in another file calling
``module_list[0]``; round t16a): such a container has no forward, so
``accel.prepare_model`` around it never averages a gradient. AM004 leaves the
file whole with a finding naming the construction, instead of wrapping it (the
migrated run failed at the first backward: a LOUD by accident)."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn

from helper.loops import train


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)


model_s = Net()
head = nn.Linear(2, 2)
trainable_list = nn.ModuleList([])
trainable_list.append(model_s)
trainable_list.append(head)
optimizer = torch.optim.SGD(trainable_list.parameters(), lr=0.1)
loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4)
for epoch in range(2):
    train(loader, trainable_list, optimizer)
"""


def test_a_trained_module_list_is_not_wrapped_and_blocks_the_file() -> None:
    result = migrate_source(SCRIPT, "main.py")
    assert result.output == SCRIPT
    (finding,) = [f for f in result.findings if f.code == "AM004"]
    assert finding.status == "needs-review"
    assert finding.line == 18
    assert "`trainable_list` is trained" in finding.message
    assert "`nn.ModuleList([])` (line 18)" in finding.message
    assert "no forward of its own" in finding.message
    assert "Nothing in this file was migrated" in finding.message


def test_a_module_dict_moved_to_the_device_is_seen_through_to() -> None:
    source = SCRIPT.replace(
        "trainable_list = nn.ModuleList([])\n"
        "trainable_list.append(model_s)\n"
        "trainable_list.append(head)\n",
        'trainable_list = nn.ModuleDict({"s": model_s, "h": head}).to("cpu")\n',
    )
    result = migrate_source(source, "main.py")
    assert result.output == source
    (finding,) = [f for f in result.findings if f.code == "AM004"]
    assert "nn.ModuleDict(" in finding.message
    assert "no forward of its own" in finding.message


def test_a_plain_model_is_still_wrapped() -> None:
    source = SCRIPT.replace(
        "trainable_list = nn.ModuleList([])\n"
        "trainable_list.append(model_s)\n"
        "trainable_list.append(head)\n",
        "trainable_list = nn.Sequential(model_s, head)\n",
    )
    result = migrate_source(source, "main.py")
    assert "accel.prepare_model(nn.Sequential(model_s, head))" in result.output
    assert not [f for f in result.findings if "no forward of its own" in f.message]
