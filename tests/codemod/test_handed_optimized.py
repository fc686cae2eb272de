"""A trainer class of the batch handed two models it trains (a GAN trainer):
the caller prepares both, and a model it builds whose forward reduces over the
batch is named though the loaders are sharded in the trainer's file."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

GAN = """\
import torch
from torch.utils.data import DataLoader


class ProGAN:
    def __init__(self, gen, dis, device="cpu", use_ema=True):
        self.gen = gen.to(device)
        self.dis = dis.to(device)
        self.use_ema = use_ema

    def optimize_discriminator(self, loss, dis_optim, noise, real):
        fake = self.gen(noise).detach()
        dis_loss = loss(self.dis, real, fake)
        dis_optim.zero_grad()
        dis_loss.backward()
        dis_optim.step()
        return dis_loss.item()

    def train(self, dataset, batch_size, loss):
        gen_optim = torch.optim.Adam(params=self.gen.parameters(), lr=0.003)
        dis_optim = torch.optim.Adam(self.dis.parameters(), lr=0.003)
        data = DataLoader(dataset, batch_size=batch_size, shuffle=True)
        for images in data:
            noise = torch.zeros(images.shape[0], 4)
            print(self.optimize_discriminator(loss, dis_optim, noise, images))
"""

NETWORKS = """\
import torch
import torch.nn as nn


class MinibatchStdDev(nn.Module):
    def forward(self, x):
        y = x - x.mean(dim=0, keepdim=True)
        return torch.cat([x, y.std(dim=0, keepdim=True).expand_as(x)], 1)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.std = MinibatchStdDev()
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(self.std(x))


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)

    def forward(self, z):
        return self.body(z)
"""

SCRIPT = """\
import torch

from gan import ProGAN
from networks import Discriminator, Generator

gen = Generator()
dis = Discriminator()
pro_gan = ProGAN(gen, dis, device="cpu")
pro_gan.train(dataset, 4, loss)
torch.save({"gen": gen.state_dict(), "dis": dis.state_dict()}, "out.pt")
"""


def _batch(tmp_path: Path) -> tuple[Path, ProjectView]:
    (tmp_path / "gan.py").write_text(GAN)
    (tmp_path / "networks.py").write_text(NETWORKS)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    files = [str(tmp_path / n) for n in ("main.py", "gan.py", "networks.py")]
    return script, ProjectView(files)


def test_every_handed_model_the_trainer_builds_an_optimizer_over(
    tmp_path: Path,
) -> None:
    """ProGAN's step runs `self.gen` (its trained parameter) and its `train()`
    builds an optimizer over `self.dis` too (by `params=` and positionally):
    both are named, and the script prepares both models it hands (only `gen`
    was prepared before, and `dis` trained unsynchronised on every process)."""
    script, view = _batch(tmp_path)
    facts = view.facts_for(str(script))
    fact = dict(facts.helpers)["gan.ProGAN"]
    assert fact.trained_parameter == ("gen", 0)
    assert fact.optimized_parameters == (("gen", 0), ("dis", 1))
    result = migrate_source(
        script.read_bytes(), str(script), MigrateOptions(project=facts)
    )
    output = result.output.decode()  # type: ignore[union-attr]
    assert "gen = accel.prepare_model(Generator())" in output
    assert "dis = accel.prepare_model(Discriminator())" in output
    assert '"dis": accel.state_dict(dis)' in output


def test_a_batch_mixing_model_handed_to_a_batch_trainer_is_named(
    tmp_path: Path,
) -> None:
    """The script shards no loader itself (gan.py does), but the Discriminator
    it builds and hands to ProGAN reduces over dimension 0 in
    MinibatchStdDev.forward: AM037 names it at the construction (it was not
    reported, as the file shards no loader)."""
    script, view = _batch(tmp_path)
    result = migrate_source(
        script.read_bytes(),
        str(script),
        MigrateOptions(project=view.facts_for(str(script))),
    )
    found = [f for f in result.findings if f.code == "AM037"]
    assert [f.line for f in found] == [7]
    assert found[0].message.startswith(
        "builds `Discriminator` in networks.py, in which `MinibatchStdDev.forward` "
        "reduces over dimension 0"
    )
