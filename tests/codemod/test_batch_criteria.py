"""A criterion the batch's other files hand a function or a class of a file
(``reduction/batch_criteria``): its reduction is theirs, not a mean by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_migrate.cli import main

ENGINE = """\
def train_one_epoch(model, loader, criterion, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        print(loss.item())
"""

TRAINER = """\
class Trainer:
    def __init__(self, model, optimizer, criterion, loader):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion
        self.loader = loader

    def fit(self):
        for x, y in self.loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()
"""

HEAD = """\
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
loader = DataLoader(data, batch_size=4, shuffle=True)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""


def _run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    helper: tuple[str, str],
    main_body: str,
) -> tuple[str, list[dict]]:
    root = tmp_path / "proj"
    root.mkdir()
    (root / helper[0]).write_text(helper[1])
    (root / "main.py").write_text(HEAD + main_body)
    main(["--write", "--no-cache", "--output-format", "json", str(root)])
    report = json.loads(capsys.readouterr().out)
    findings = [
        f
        for entry in report["files"]
        if Path(entry["path"]).name == helper[0]
        for f in entry["findings"]
    ]
    return (root / helper[0]).read_text(), findings


@pytest.mark.parametrize(
    "built",
    [
        'criterion = nn.MSELoss(reduction="sum")\n',
        'criterion = nn.MSELoss(reduction="sum").to(torch.device("cpu"))\n',
        # pytorch-vdsr: moved by a second binding of the same name
        "criterion = nn.MSELoss(size_average=False)\ncriterion = criterion.cuda()\n",
    ],
    ids=["built", "moved", "moved-again"],
)
def test_a_summing_criterion_handed_to_a_function_of_another_file_is_a_sum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], built: str
) -> None:
    """Migrated as a folder, engine.py's backward was weighed as a mean: half
    the gradient at two processes, no finding (SILENT in the corpus)."""
    body = (
        "from engine import train_one_epoch\n\n"
        + built
        + "train_one_epoch(model, loader, criterion, optimizer)\n"
    )
    text, findings = _run(tmp_path, capsys, ("engine.py", ENGINE), body)
    assert 'accel.backward(loss, reduction="sum")' in text
    assert any("main.py" in f["message"] for f in findings if f["code"] == "AM007")


def test_a_summing_criterion_kept_by_a_trainer_class_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read as a mean before (SILENT). Not a proven sum either (rev19a): a
    subclass's instances and `trainer.criterion = ...` in another file are not
    among the calls of `Trainer.__init__`, so it is needs-review."""
    body = (
        "from trainer import Trainer\n\n"
        "criterion = nn.L1Loss(size_average=False)\n"
        "Trainer(model, optimizer, criterion, loader).fit()\n"
    )
    text, findings = _run(tmp_path, capsys, ("trainer.py", TRAINER), body)
    assert 'reduction="sum"' not in text
    reviews = [f for f in findings if f["status"] == "needs-review"]
    assert any(
        f["code"] == "AM007" and "subclass" in f["message"] for f in reviews
    ), findings


def test_a_criterion_whose_setting_the_caller_writes_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`criterion.reduction = "mean"` after building a sum (rev19a's H)."""
    body = (
        "from engine import train_one_epoch\n\n"
        'criterion = nn.MSELoss(reduction="sum")\n'
        'criterion.reduction = "mean"\n'
        "train_one_epoch(model, loader, criterion, optimizer)\n"
    )
    text, findings = _run(tmp_path, capsys, ("engine.py", ENGINE), body)
    assert 'reduction="sum"' not in text
    assert any(
        f["code"] == "AM007" and f["status"] == "needs-review" for f in findings
    ), findings


def test_a_mean_criterion_handed_in_is_weighed_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = (
        "from engine import train_one_epoch\n\n"
        "criterion = nn.MSELoss()\n"
        "train_one_epoch(model, loader, criterion, optimizer)\n"
    )
    text, findings = _run(tmp_path, capsys, ("engine.py", ENGINE), body)
    assert "accel.backward(loss)\n" in text
    assert not [f for f in findings if f["status"] == "needs-review"]


@pytest.mark.parametrize(
    "body",
    [
        # two callers that hand different reductions
        "from engine import train_one_epoch\n\n"
        "train_one_epoch(model, loader, nn.MSELoss(), optimizer)\n"
        'criterion = nn.MSELoss(reduction="sum")\n'
        "train_one_epoch(model, loader, criterion, optimizer)\n",
        # a mean over the tokens the criterion does not ignore
        "from engine import train_one_epoch\n\n"
        "criterion = nn.CrossEntropyLoss(ignore_index=0)\n"
        "train_one_epoch(model, loader, criterion, optimizer)\n",
    ],
    ids=["callers-differ", "token-mean"],
)
def test_a_criterion_whose_reduction_is_no_single_sum_or_mean_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str
) -> None:
    _text, findings = _run(tmp_path, capsys, ("engine.py", ENGINE), body)
    reviews = [f for f in findings if f["status"] == "needs-review"]
    assert any(
        f["code"] == "AM007" and "main.py" in f["message"] for f in reviews
    ), findings


VAE_LOSS = """\
import torch.nn.functional as F


def loss_function(recon_x, x, mu, logvar):
    bce = F.mse_loss(recon_x, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def mean_loss(output, target):
    return F.mse_loss(output, target)


"""


def test_a_summing_loss_function_handed_in_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The VAE's loss_function, handed from main.py to engine.py's train: its
    sum depends on its arguments, so it is not read as a loss where it is
    defined; weighed as a mean it halved the gradient (SILENT)."""
    body = (
        VAE_LOSS
        + "from engine import train_one_epoch\n\n"
        + "train_one_epoch(model, loader, loss_function, optimizer)\n"
    )
    _text, findings = _run(tmp_path, capsys, ("engine.py", ENGINE), body)
    reviews = [f for f in findings if f["status"] == "needs-review"]
    assert any(f["code"] == "AM007" and "main.py" in f["message"] for f in reviews)


def test_a_mean_loss_function_handed_in_is_weighed_as_a_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = (
        VAE_LOSS
        + "from engine import train_one_epoch\n\n"
        + "train_one_epoch(model, loader, mean_loss, optimizer)\n"
    )
    text, findings = _run(tmp_path, capsys, ("engine.py", ENGINE), body)
    assert "accel.backward(loss)\n" in text
    assert not [f for f in findings if f["status"] == "needs-review"]


def test_a_summing_criterion_a_third_module_builds_is_a_sum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """main.py's criterion = build_criterion() of losses.py, handed to engine.py."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "losses.py").write_text(
        "from torch import nn\n\n\n"
        "def build_criterion(kind='l2'):\n"
        "    if kind == 'l1':\n"
        "        return nn.L1Loss(reduction='sum')\n"
        "    return nn.MSELoss(reduction='sum').cuda()\n"
    )
    body = (
        "from engine import train_one_epoch\n"
        "from losses import build_criterion\n\n"
        "criterion = build_criterion()\n"
        "train_one_epoch(model, loader, criterion, optimizer)\n"
    )
    root = tmp_path / "proj"
    (root / "engine.py").write_text(ENGINE)
    (root / "main.py").write_text(HEAD + body)
    main(["--write", "--no-cache", "-q", str(root)])
    capsys.readouterr()
    assert 'accel.backward(loss, reduction="sum")' in (root / "engine.py").read_text()


def test_a_summing_criterion_kept_moved_by_a_trainer_class_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`self.criterion = criterion.to(device)`: weighed as a mean before (rev19a's
    T1); the class path proves no sum, so needs-review."""
    trainer = TRAINER.replace(
        "self.criterion = criterion", "self.criterion = criterion.to('cpu')"
    )
    body = (
        "from trainer import Trainer\n\n"
        "criterion = nn.L1Loss(size_average=False)\n"
        "Trainer(model, optimizer, criterion, loader).fit()\n"
    )
    _text, findings = _run(tmp_path, capsys, ("trainer.py", trainer), body)
    assert any(
        f["code"] == "AM007" and f["status"] == "needs-review" for f in findings
    ), findings
