"""The class of a model whose forward computes the loss, followed through the
parameters of the file's functions (``codemod/reduction/model_classes.py``):
every call must pass a model of one known class, or the loss's reduction is not
known (needs-review, never a silent mean over samples). The shapes that work are
in fixtures/projects/forward_loss_reach."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView
from tests.conftest import FIXTURES

MODELS = FIXTURES / "projects" / "forward_loss_reach" / "in" / "models.py"

SCRIPT = """\
import threading

import torch
from torch.utils.data import DataLoader, TensorDataset

from models import CharGPT, Regressor


def train(model, loader, optimizer, device="cpu"):
    model = model.to(device)
    for x, y in loader:
        logits, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


data = torch.randint(0, 12, (64, 9))
loader = DataLoader(TensorDataset(data[:, :-1], data[:, 1:]), batch_size=8)
gpt = CharGPT(12, 48)
{calls}
"""


def _am007(tmp_path: Path, calls: str):  # type: ignore[no-untyped-def]
    shutil.copy(MODELS, tmp_path / "models.py")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.replace("{calls}", calls))
    view = ProjectView([str(script), str(tmp_path / "models.py")])
    result = migrate_source(
        script.read_bytes(),
        str(script),
        MigrateOptions(project=view.facts_for(str(script))),
    )
    [am007] = [f for f in result.findings if f.code == "AM007"]
    return am007, result.output.decode()


def test_every_call_passing_one_class_gives_its_count(tmp_path: Path) -> None:
    """``model = model.to(device)`` in the function is the same model."""
    am007, output = _am007(
        tmp_path,
        "opt = torch.optim.AdamW(gpt.parameters())\n"
        "train(gpt, loader, opt)\ntrain(gpt, loader, opt, device='cpu')",
    )
    assert am007.status == "fixed"
    assert "accel.backward(loss, count=(y != -1).sum())" in output


@pytest.mark.parametrize(
    ("calls", "why"),
    [
        (
            "reg = Regressor(8)\n"
            "train(gpt, loader, torch.optim.AdamW(gpt.parameters()))\n"
            "train(reg, loader, torch.optim.AdamW(reg.parameters()))",
            "may be a model of several classes (`CharGPT`, `Regressor`)",
        ),
        (
            "opt = torch.optim.AdamW(gpt.parameters())\n"
            "train(gpt, loader, opt)\n"
            "threading.Thread(target=train, args=(gpt, loader, opt)).start()",
            "`train`, which is also used as a value",
        ),
    ],
    ids=["two_classes", "used_as_value"],
)
def test_calls_that_do_not_agree_leave_the_reduction_unknown(
    tmp_path: Path, calls: str, why: str
) -> None:
    """Before: ``accel.backward(loss)`` [fixed], a silent mean over samples."""
    am007, output = _am007(tmp_path, calls)
    assert am007.status == "needs-review"
    assert why in am007.message
    assert "accel.backward(loss)\n" in output
