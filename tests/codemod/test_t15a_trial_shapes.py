"""Shapes of the t15a new-user trial (scientific and dense regression).

jhhuang96/ConvLSTM-PyTorch's validation loop collects ``loss_aver =
loss.item() / args.batch_size`` with ``valid_losses.append(loss_aver)``; the
same name is assigned in the training loop too. AM009 wrapped the appended
name in ``accel.global_loss(...)``, which takes a tensor: the migrated run
crashed with ``'float' object has no attribute 'detach'``. A number read off a
tensor goes through ``torch.as_tensor`` now (``BatchForms.number_valued``)."""

from __future__ import annotations

import libcst as cst
import pytest

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.metrics.forms import direct_reads

SCRIPT = """\
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters())
lossfunction = nn.MSELoss()
ds = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
trainLoader = DataLoader(ds, batch_size=4)
validLoader = DataLoader(ds, batch_size=4)
train_losses = []
valid_losses = []
for x, y in trainLoader:
    optimizer.zero_grad()
    loss = lossfunction(model(x), y)
    loss_aver = loss.item() / args.batch_size
    train_losses.append(loss_aver)
    loss.backward()
    optimizer.step()
with torch.no_grad():
    for x, y in validLoader:
        loss = lossfunction(model(x), y)
        loss_aver = loss.item() / args.batch_size
        valid_losses.append(loss_aver)
print(np.average(train_losses), np.average(valid_losses))
"""


def test_an_appended_number_goes_through_as_tensor() -> None:
    result = migrate_source(SCRIPT, "main.py")
    assert (
        "valid_losses.append(accel.global_loss(torch.as_tensor(loss_aver)).item())"
        in result.output
    )
    assert "accel.global_loss(loss_aver)" not in result.output
    found = [f for f in result.findings if f.code == "AM009" and f.line == 25]
    assert [f.status for f in found] == ["fixed"]


def test_a_number_of_a_call_of_unknown_kind_is_not_taken_for_one() -> None:
    """``float(...)`` of a call is a read; a bare call is not a number."""
    assert direct_reads(
        cst.parse_expression("loss.item() / args.batch_size"), names=True
    )
    assert direct_reads(cst.parse_expression("2 * float(loss) + bias"), names=True)
    assert not direct_reads(cst.parse_expression("loss / args.batch_size"), names=True)
    assert not direct_reads(cst.parse_expression("loss.item() / f(x)"), names=True)
    assert not direct_reads(cst.parse_expression("loss.item() ** 2"), names=True)


STOPPER = """\
import torch


class EarlyStopping:
    def __init__(self, patience=7):
        self.patience = patience
        self.counter = 0
        self.best_score = None
        self.early_stop = False

    def __call__(self, val_loss, model, epoch, save_path):
        score = -val_loss
        if self.best_score is None or score > self.best_score:
            self.best_score = score
            torch.save(model, save_path + "/checkpoint_%d.pth.tar" % epoch)
            self.counter = 0
        else:
            self.counter += 1
            if self.counter >= self.patience:
                self.early_stop = True
"""

LOOP = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from earlystopping import EarlyStopping

model = nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
early_stopping = EarlyStopping(patience=2)
for epoch in range(10):
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    early_stopping(1.0 / (epoch + 1), model.state_dict(), epoch, ".")
    {test}
"""


def _am017(tmp_path, test: str) -> tuple[str, list[str]]:
    (tmp_path / "earlystopping.py").write_text(STOPPER)
    script = tmp_path / "main.py"
    script.write_text(LOOP.format(test=test))
    result = migrate_source(script.read_text(), str(script))
    found = [f for f in result.findings if f.code == "AM017" and f.line == 10]
    return result.output, [f"{f.status}: {f.message}" for f in found]


def test_a_saver_whose_state_is_read_stays_on_every_process(tmp_path) -> None:
    """jhhuang96/ConvLSTM-PyTorch: ``if early_stopping.early_stop: break``; on
    the other processes the stand-in was true at once and they left the loop
    (a collective timeout, HANG)."""
    output, found = _am017(tmp_path, "if early_stopping.early_stop:\n        break")
    assert "accel.on_main_process(EarlyStopping" not in output
    assert len(found) == 1
    assert found[0].startswith("needs-review: `EarlyStopping` in earlystopping.py")
    assert "reads `early_stopping.early_stop` off the object" in found[0]


def test_a_saver_only_called_is_still_moved(tmp_path) -> None:
    output, found = _am017(tmp_path, "pass")
    assert "accel.on_main_process(EarlyStopping, patience=2)" in output
    assert [f.split(":")[0] for f in found] == ["fixed"]


def test_an_appended_number_in_a_file_without_torch_is_reported() -> None:
    """The same loop in a file that imports ``torch.nn`` and ``from torch
    import ...`` but not ``torch``: no ``torch.as_tensor`` can be written, and
    the appended number was wrapped in ``accel.global_loss(loss_aver)`` (a
    crash on a float). It is a needs-review finding now, the call unchanged."""
    source = (
        SCRIPT.replace("import torch\n", "")
        .replace(
            "import torch.nn as nn\n",
            "import torch.nn as nn\nfrom torch import optim, randn\n",
        )
        .replace("torch.optim.Adam", "optim.Adam")
        .replace("torch.randn", "randn")
        .replace("with torch.no_grad():\n", "if True:\n")
    )
    assert "torch." not in source.replace("torch.nn", "").replace("torch.utils", "")
    result = migrate_source(source, "main.py")
    assert "accel.global_loss(loss_aver)" not in result.output
    assert "valid_losses.append(loss_aver)" in result.output
    found = [f for f in result.findings if f.code == "AM009" and f.line == 25]
    assert found and {f.status for f in found} == {"needs-review"}
    assert "the file does not import torch" in found[0].message


HANDED = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from earlystopping import EarlyStopping


def fit(model, optimizer, loader, stopper):
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        stopper(1.0 / (epoch + 1), model.state_dict(), epoch, ".")
        if stopper.early_stop:
            break


model = nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randn(32, 1)), batch_size=4)
{build}
"""


@pytest.mark.parametrize(
    ("build", "line", "where"),
    [
        (
            "early_stopping = EarlyStopping(patience=2)\n"
            "fit(model, optimizer, loader, early_stopping)",
            23,
            "(`fit(model, optimizer, loader, early_stopping)`)",
        ),
        ("fit(model, optimizer, loader, EarlyStopping(patience=2))", 23, "(`fit("),
        (
            "stoppers = [EarlyStopping(patience=2)]\n"
            "fit(model, optimizer, loader, stoppers[0])",
            23,
            "(`stoppers = [EarlyStopping(patience=2)]`)",
        ),
    ],
)
def test_a_saver_that_leaves_its_name_stays_on_every_process(
    tmp_path, build: str, line: int, where: str
) -> None:
    """rev15 b: the ConvLSTM stopper handed to a function that tests
    ``stopper.early_stop`` went under accel.on_main_process (HANG)."""
    (tmp_path / "earlystopping.py").write_text(STOPPER)
    script = tmp_path / "main.py"
    script.write_text(HANDED.format(build=build))
    result = migrate_source(script.read_text(), str(script))
    assert "accel.on_main_process(EarlyStopping" not in result.output
    found = [f for f in result.findings if f.code == "AM017" and f.line == line]
    assert [f.status for f in found] == ["needs-review"]
    assert f"the object leaves its name {where}" in found[0].message
