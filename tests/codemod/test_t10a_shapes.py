"""Shapes of the t10a new-user trial (docs/soundness.md).

- AM010: a file saved under a templated path (``"model_epoch_{}.pth".format(
  epoch)``) and then handed, as another path of the same template, to a function
  of another module that loads it (pytorch/examples super_resolution's
  ``super_resolve``) is read back: a barrier follows the save.
- AM037: ``torch.roll(images, n)`` / ``x.flip(0)`` of a training step's batch
  moves values between its samples (PatrickHua/SimSiam's stream fork).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source

SR_MAIN = """\
import torch
from torch.utils.data import DataLoader

from resolve import super_resolve

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
loader = DataLoader(torch.randn(8, 4), batch_size=4, shuffle=True)


def train():
    for x in loader:
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()


def checkpoint(epoch):
    model_out_path = {save_path}
    torch.save(model, model_out_path)


for epoch in range(1, 3):
    train()
    checkpoint(epoch)

out = super_resolve({load_path}, torch.randn(1, 4))
"""

RESOLVE = """\
import torch


def super_resolve(model_path, x):
    model = torch.load(model_path, weights_only=False)
    return model(x)
"""


def _migrate(tmp_path: Path, source: str) -> tuple[str, list[str]]:
    (tmp_path / "resolve.py").write_text(RESOLVE)
    script = tmp_path / "main.py"
    script.write_text(source)
    result = migrate_source(source, str(script))
    return result.output, [f"{f.code} {f.status} {f.message}" for f in result.findings]


@pytest.mark.parametrize(
    "save_path, load_path",
    [
        ('"model_epoch_{}.pth".format(epoch)', '"model_epoch_{}.pth".format(2)'),
        ('f"model_epoch_{epoch}.pth"', '"model_epoch_{}.pth".format(2)'),
        ('"model_epoch_" + str(epoch) + ".pth"', 'f"model_epoch_{2}.pth"'),
        ('"model_epoch_%d.pth" % epoch', '"model_epoch_{:d}.pth".format(2)'),
        ('"model_epoch_{}.pth".format(epoch)', '"model_epoch_2.pth"'),
    ],
)
def test_a_templated_save_handed_to_a_loader_of_another_module_is_fenced(
    tmp_path: Path, save_path: str, load_path: str
) -> None:
    output, findings = _migrate(
        tmp_path, SR_MAIN.format(save_path=save_path, load_path=load_path)
    )
    assert "    accel.save(model, model_out_path)\n    accel.barrier()\n" in output
    assert any(
        f.startswith("AM010 fixed the file is loaded again later") for f in findings
    )


@pytest.mark.parametrize(
    "load_path",
    ['"other_{}.pth".format(2)', '"model_epoch_2.pt"', "path_of(2)"],
)
def test_another_template_is_not_the_saved_file(tmp_path: Path, load_path: str) -> None:
    output, findings = _migrate(
        tmp_path,
        SR_MAIN.format(
            save_path='"model_epoch_{}.pth".format(epoch)', load_path=load_path
        ),
    )
    assert "accel.barrier()" not in output
    assert not any("loaded again" in f for f in findings)


def test_a_templated_load_in_the_same_module_is_read_back(tmp_path: Path) -> None:
    source = SR_MAIN.format(
        save_path='"model_epoch_{}.pth".format(epoch)', load_path='"x"'
    ).replace(
        'out = super_resolve("x", torch.randn(1, 4))',
        'best = torch.load("model_epoch_{}.pth".format(2), weights_only=False)',
    )
    output, _ = _migrate(tmp_path, source)
    assert "    accel.save(model, model_out_path)\n    accel.barrier()\n" in output


STEP = """\
import torch
from torch.utils.data import DataLoader

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(torch.randn(8, 4), batch_size=4)
for images in loader:
    pair = {moved}
    loss = (model(pair) - model(images)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    "moved",
    [
        "torch.roll(images, 1)",
        "torch.roll(images, 1, 0)",
        "torch.roll(images, shifts=1, dims=0)",
        "images.roll(1, dims=(0, 1))",
        "images.flip(0)",
        "torch.flip(images, [0])",
    ],
)
def test_moving_values_between_the_samples_of_a_step_is_reported(
    tmp_path: Path, moved: str
) -> None:
    _, findings = _migrate(tmp_path, STEP.format(moved=moved))
    assert any(
        f.startswith("AM037 needs-review") and "moves values between the samples" in f
        for f in findings
    ), findings


@pytest.mark.parametrize(
    "moved",
    ["torch.roll(images, 1, 1)", "images.flip(1)", "torch.flip(images, dims=[1])"],
)
def test_moving_along_another_dimension_is_not_reported(
    tmp_path: Path, moved: str
) -> None:
    _, findings = _migrate(tmp_path, STEP.format(moved=moved))
    assert not any("moves values between the samples" in f for f in findings)


def test_a_moved_batch_no_later_statement_reads_is_not_reported(
    tmp_path: Path,
) -> None:
    # `images = images.flip(0)` last in the loop's body: the loop binds `images`
    # again before anything reads the flipped one, so no loss sees it.
    dead = STEP.format(moved="images").replace(
        "    optimizer.step()\n", "    optimizer.step()\n    images = images.flip(0)\n"
    )
    _, findings = _migrate(tmp_path, dead)
    assert not any("moves values between the samples" in f for f in findings)
    # read after it (a second loss on the flipped batch): reported
    live = dead + "    print(model(images).sum().item())\n"
    _, findings = _migrate(tmp_path, live)
    assert any("moves values between the samples" in f for f in findings), findings


STYLE = """\
import torch
import torch.nn as nn
import torch.optim as optim

net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
for param in net.parameters():
    param.requires_grad = False
target = torch.randn(1, 4, 6, 6)


def setup_optimizer(img):
    return optim.LBFGS([img], max_iter=4)


def main():
    img = nn.Parameter(torch.randn(1, 3, 8, 8))
    optimizer = setup_optimizer(img)

    def feval():
        optimizer.zero_grad()
        loss = (net(img) - target).pow(2).mean()
        loss.backward()
        return loss

    optimizer.step(feval)
    torch.save(img.detach(), "out.pt")


main()
"""


def test_a_tensor_optimised_with_no_loader_blocks_the_file(tmp_path: Path) -> None:
    """neural-style-pt: every process would run the same optimisation, and the
    runtime refuses a prepared optimizer's tensor of no prepared model."""
    output, findings = _migrate(tmp_path, STYLE)
    assert output == STYLE
    assert any(
        f.startswith("AM031 needs-review `img` is a tensor this script trains")
        and "No data loader this file shards feeds it" in f
        and "nothing to divide between processes" in f
        and "`optim.LBFGS([img], max_iter=4)`" in f
        for f in findings
    ), findings


def test_a_tensor_no_optimizer_steps_does_not_block(tmp_path: Path) -> None:
    source = (
        STYLE.replace("    optimizer.step(feval)\n", "    feval()\n")
        .replace("    optimizer = setup_optimizer(img)\n", "    optimizer = None\n")
        .replace("        optimizer.zero_grad()\n", "")
    )
    _, findings = _migrate(tmp_path, source)
    assert not any(f.startswith("AM031") for f in findings)


DEIT = """\
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

from dist_utils import get_rank, get_world_size, is_main_process


def local_world_size():
    return dist.get_world_size() if dist.is_initialized() else 1


def main(lr, batch_size, seed):
    torch.manual_seed(seed + get_rank())
    model = torch.nn.Linear(4, 1)
    scaled = lr * batch_size * {world} / 512.0
    optimizer = torch.optim.SGD(model.parameters(), lr=scaled)
    for x in DataLoader(torch.randn(8, 4), batch_size=batch_size):
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
    if is_main_process():
        torch.save(model.state_dict(), "ckpt.pth")


main(0.1, 4, 0)
"""

DIST_UTILS = """\
import torch.distributed as dist


def is_dist_avail_and_initialized():
    return dist.is_available() and dist.is_initialized()


def get_world_size():
    if not is_dist_avail_and_initialized():
        return 1
    return dist.get_world_size()


def get_rank():
    if not is_dist_avail_and_initialized():
        return 0
    return dist.get_rank()


def is_main_process():
    return get_rank() == 0
"""


@pytest.mark.parametrize("world", ["get_world_size()", "local_world_size()"])
def test_a_world_size_and_a_seeded_rank_are_reported(
    tmp_path: Path, world: str
) -> None:
    (tmp_path / "dist_utils.py").write_text(DIST_UTILS)
    _, findings = _migrate(tmp_path, DEIT.replace("{world}", world))
    am046 = [f for f in findings if f.startswith("AM046 needs-review")]
    assert any(
        f"`{world}` asks torch.distributed for the process group's world size" in f
        for f in am046
    ), findings
    assert any(
        "`get_rank()` asks torch.distributed for the process group's rank" in f
        for f in am046
    ), findings
    assert not any("is_main_process" in f for f in am046)
    assert len(am046) == 2


BASE = """\
import torch


class NetworkTrainer:
    def __init__(self):
        self.epoch = 0

    def run_training(self, epochs):
        while self.epoch < epochs:
            loss = self.run_iteration()
            print("epoch", self.epoch, "loss", loss)
            torch.save(self.network.state_dict(), "model_latest.model")
            self.epoch += 1
"""

TRAINER = """\
import torch
from torch.utils.data import DataLoader

from base import NetworkTrainer


class Trainer(NetworkTrainer):
    def __init__(self):
        super().__init__()
        self.network = torch.nn.Linear(4, 1)
        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=0.1)
        self.loader = DataLoader(torch.randn(8, 4), batch_size=4)

    def run_iteration(self):
        for x in self.loader:
            self.optimizer.zero_grad()
            loss = self.network(x).pow(2).mean()
            loss.backward()
            self.optimizer.step()
        return loss.item()
"""


def test_the_base_module_of_a_batch_trainer_is_migrated_for_it(tmp_path: Path) -> None:
    """nnU-Net: nnUNetTrainer(NetworkTrainer) trains; the base's run_training
    prints and saves on every process unless its module is migrated too."""
    from accel_migrate.codemod import MigrateOptions
    from accel_migrate.codemod.project_view import ProjectView

    base, trainer = tmp_path / "base.py", tmp_path / "trainer.py"
    base.write_text(BASE)
    trainer.write_text(TRAINER)
    view = ProjectView([str(base), str(trainer)])
    assert view.facts_for(str(base)).library_for == ("trainer.py",)
    result = migrate_source(
        BASE, str(base), MigrateOptions(project=view.facts_for(str(base)))
    )
    assert 'accel.print("epoch", self.epoch, "loss", loss)' in result.output
    assert "accel.save(" in result.output
    alone = ProjectView([str(base)])
    assert alone.facts_for(str(base)).library_for == ()
