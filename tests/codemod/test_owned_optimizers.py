"""AM004: a model whose attribute gives the optimizer the script steps
(pix2pixHD's ``optimizer_G = model.module.optimizer_G``) is a trained model."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source

MODELS = """\
import torch


class Pix2PixHDModel(torch.nn.Module):
    def initialize(self, opt):
        self.netG = torch.nn.Linear(4, 4)
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=opt.lr)

    def forward(self, x):
        return [self.netG(x).pow(2).mean()]


def create_model(opt):
    model = Pix2PixHDModel()
    model.initialize(opt)
    return torch.nn.DataParallel(model, device_ids=opt.gpu_ids)
"""

SCRIPT = """\
import torch

from models import create_model

model = create_model(opt)
optimizer_G, optimizer_D = model.module.optimizer_G, model.module.optimizer_D
for data in dataset:
    losses = model(data["label"])
    loss_G = torch.mean(losses[0])
    optimizer_G.zero_grad()
    loss_G.backward()
    optimizer_G.step()
    print("loss %.4f" % loss_G.item())
"""


def test_a_model_whose_attribute_is_the_stepped_optimizer_leaves_the_file_whole(
    tmp_path: Path,
) -> None:
    """The script builds no optimizer and calls no `model.train()`: its
    backward and prints were rewritten while the model, built by models.py's
    create_model, stayed unprepared (the runtime then stopped the run, LOUD).
    The optimizer it steps is an attribute of `model`, which the loop calls:
    the file is left whole, naming `model`."""
    (tmp_path / "models.py").write_text(MODELS)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.line == 5
    assert blocking.message.startswith(
        "`model` is a model (`optimizer_G = model.module.optimizer_G`) called in a "
        "training loop (line 8), but its parameters reach no optimizer built in "
        "this file"
    )


def test_an_optimizer_of_another_object_than_the_called_one_is_not_evidence(
    tmp_path: Path,
) -> None:
    """The stepped optimizer is an attribute of `trainer`, which the loop does
    not call: `model` is not taken for trained through it (the evidence is the
    attribute's owner, called in the loop)."""
    (tmp_path / "models.py").write_text(MODELS)
    script = tmp_path / "main.py"
    script.write_text(
        SCRIPT.replace(
            "optimizer_G, optimizer_D = model.module.optimizer_G, "
            "model.module.optimizer_D",
            "optimizer_G = trainer.optimizer_G",
        )
    )
    result = migrate_source(script.read_bytes(), str(script))
    assert not any(
        f.code == "AM004" and "optimizer_G = " in f.message for f in result.findings
    )
