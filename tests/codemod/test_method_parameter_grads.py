"""AM040 through a method of a model class of another module that takes
``torch.autograd.grad`` with respect to the model's own parameters (VQGAN's
adaptive weight ``calculate_lambda``: ``method_parameter_grads``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

MODEL = """
import torch
import torch.nn as nn


class VQGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 4))

    def forward(self, x):
        return self.decoder(x)

    def calculate_lambda(self, perceptual_loss, gan_loss):
        last_layer = self.decoder[-1]
        last_layer_weight = last_layer.weight
        p = torch.autograd.grad(perceptual_loss, last_layer_weight, retain_graph=True)[0]
        g = torch.autograd.grad(gan_loss, last_layer_weight, retain_graph=True)[0]
        return (torch.norm(p) / (torch.norm(g) + 1e-4)).detach()

    def input_gradient(self, out, x):
        return torch.autograd.grad(out.sum(), x)[0]
"""

SCRIPT = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from vqgan import VQGAN

model = VQGAN()
opt = torch.optim.Adam(model.parameters())
loader = DataLoader(TensorDataset(torch.randn(16, 4)), batch_size=4)
for (x,) in loader:
    x.requires_grad_(True)
    out = model(x)
    rec = ((out - x) ** 2).mean()
    gan = -out.mean()
    {line}
    loss = rec + lam * gan
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def _migrate(tmp_path: Path, line: str) -> tuple[str, str, list[str]]:
    (tmp_path / "vqgan.py").write_text(MODEL)
    script = tmp_path / "train.py"
    source = SCRIPT.format(line=line)
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    found = [
        f"{f.line}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
        if f.code == "AM040"
    ]
    return source, result.output, found


def test_fact_names_the_method(tmp_path: Path) -> None:
    (tmp_path / "vqgan.py").write_text(MODEL)
    (tmp_path / "train.py").write_text("from vqgan import VQGAN\n")
    fact = dict(read_project(str(tmp_path / "train.py")).helpers)["vqgan.VQGAN"]
    grads = dict(fact.parameter_grads)
    assert list(grads) == ["calculate_lambda"]
    assert "last_layer_weight" in grads["calculate_lambda"]


def test_a_step_calling_it_is_blocked(tmp_path: Path) -> None:
    source, code, found = _migrate(tmp_path, "lam = model.calculate_lambda(rec, gan)")
    assert len(found) == 1, found
    assert found[0].startswith("14: AM040 [needs-review]")
    assert "`VQGAN.calculate_lambda` (vqgan.py)" in found[0]
    assert "this process's share of the batch" in found[0]
    assert code == source  # left unchanged


def test_a_gradient_with_respect_to_the_batch_is_left_alone(tmp_path: Path) -> None:
    _, code, found = _migrate(
        tmp_path, "lam = model.input_gradient(out, x).norm().detach()"
    )
    assert found == []
    assert "accel.backward(loss)" in code


BASE_SPLIT = {
    # the method lives in a base class of another module of the project
    "vqbase.py": MODEL.replace("class VQGAN(nn.Module):", "class VQBase(nn.Module):"),
    "vqgan.py": (
        "from vqbase import VQBase\n\n\nclass VQGAN(VQBase):\n"
        "    def sample(self, n):\n        return self.decoder[0].weight[:n]\n"
    ),
}


def test_an_inherited_method_is_followed(tmp_path: Path) -> None:
    """``class VQGAN(VQBase)`` whose ``calculate_lambda`` is the base's (another
    module): before, only methods the class defines itself were read, and the
    step calling it was migrated with each process's own gradient."""
    for name, text in BASE_SPLIT.items():
        (tmp_path / name).write_text(text)
    script = tmp_path / "train.py"
    source = SCRIPT.format(line="lam = model.calculate_lambda(rec, gan)")
    script.write_text(source)
    fact = dict(read_project(str(script)).helpers)["vqgan.VQGAN"]
    grads = dict(fact.parameter_grads)
    assert list(grads) == ["calculate_lambda"]
    assert grads["calculate_lambda"].endswith("(in its base `VQBase`)")
    result = migrate_source(source, str(script), MigrateOptions())
    found = [f for f in result.findings if f.code == "AM040"]
    assert len(found) == 1 and found[0].status == "needs-review", found
    assert result.output == source


def test_an_override_hides_the_bases_method(tmp_path: Path) -> None:
    for name, text in BASE_SPLIT.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "vqgan.py").write_text(
        BASE_SPLIT["vqgan.py"]
        + "\n    def calculate_lambda(self, a, b):\n        return 0.8\n"
    )
    (tmp_path / "train.py").write_text("from vqgan import VQGAN\n")
    fact = dict(read_project(str(tmp_path / "train.py")).helpers)["vqgan.VQGAN"]
    assert fact.parameter_grads == ()
