"""AM020 across files: random draws in the local modules a training script
imports (``project_draws``, ``imported_draws``). The helpers are read, never
run or written."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

UTILS = """
import random

import numpy as np
import torch
import torchvision.transforms as transforms
from torch.utils.data import DataLoader, Dataset


class ReplayBuffer:
    def __init__(self, max_size=4):
        self.max_size = max_size
        self.data = []

    def push_and_pop(self, data):
        out = []
        for element in data:
            if len(self.data) < self.max_size:
                self.data.append(element)
                out.append(element)
            elif random.uniform(0, 1) > 0.5:
                i = random.randint(0, self.max_size - 1)
                out.append(self.data[i].clone())
                self.data[i] = element
            else:
                out.append(element)
        return torch.stack(out)

    def size(self):
        return len(self.data)


def add_noise(x):
    return x + _noise_like(x)


def _noise_like(x):
    return torch.randn_like(x) * 0.1


def seeded_noise(x, g):
    return x + torch.randn(x.shape, generator=g)


def init_weights(m):
    if isinstance(m, torch.nn.Linear):
        m.weight.data.normal_(0.0, 0.02)


class Jittered(Dataset):
    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i] + np.random.rand()


class Plain(Dataset):
    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i]


def get_training_dataloader(x, batch_size=4):
    transform = transforms.Compose([transforms.RandomCrop(32, padding=4)])
    return DataLoader(Plain(x), batch_size=batch_size, shuffle=True)


def get_test_dataloader(x, batch_size=4):
    return DataLoader(Plain(x), batch_size=batch_size)


def get_random_data_loader(n):
    return DataLoader(Plain(torch.randn(n, 4)), batch_size=4)
"""

MODELS = """
import torch
import torch.nn as nn


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.dec = nn.Linear(2, 4)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = h[:, :2], h[:, 2:]
        return self.dec(self.reparameterize(mu, logvar)), mu, logvar


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


def get_vae():
    return VAE()
"""

HEAD = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from models import Net, VAE, get_vae
from utils import (ReplayBuffer, add_noise, seeded_noise, init_weights, Jittered, Plain,
                   get_training_dataloader, get_test_dataloader, get_random_data_loader)

x = torch.randn(16, 4)
"""


def _findings(tmp_path: Path, body: str) -> list[str]:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "models.py").write_text(MODELS)
    script = tmp_path / "train.py"
    source = HEAD + body
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    return [
        f"{f.line}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
        if f.code == "AM020"
    ]


def test_facts_name_each_drawing_method_and_function(tmp_path: Path) -> None:
    (tmp_path / "utils.py").write_text(UTILS)
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "train.py").write_text(HEAD)
    facts = dict(read_project(str(tmp_path / "train.py")).helpers)
    assert facts["utils.ReplayBuffer"].draws == (("push_and_pop", "`random.uniform`"),)
    # followed into the module's own functions
    assert facts["utils.add_noise"].draws == (("", "`torch.randn_like`"),)
    assert facts["utils.init_weights"].draws == (("", "`.normal_()`"),)
    # a generator of its own draws the same numbers on every process
    assert facts["utils.seeded_noise"].draws == ()
    assert facts["utils.Jittered"].draws == (("__getitem__", "`numpy.random.rand`"),)
    assert facts["utils.Plain"].draws == ()
    # building an augmentation draws nothing: a loader applying it does
    assert facts["utils.get_training_dataloader"].draws == ()
    assert (
        facts["utils.get_training_dataloader"].augmentation
        == "`torchvision.transforms.RandomCrop`"
    )
    assert facts["utils.get_test_dataloader"].draws == ()
    assert facts["utils.get_test_dataloader"].augmentation == ""
    # data drawn once while the loader is built is setup, alike everywhere
    assert facts["utils.get_random_data_loader"].augmentation == ""
    # through self. methods
    assert facts["models.VAE"].draws == (
        ("reparameterize", "`torch.randn_like`"),
        ("forward", "`torch.randn_like`"),
    )
    assert facts["models.Net"].draws == ()


STEP = """
model = Net()
model.apply(init_weights)
buffer = ReplayBuffer()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(x), batch_size=4)
for (xb,) in loader:
    pooled = buffer.push_and_pop(xb)
    noisy = add_noise(pooled)
    same = seeded_noise(noisy, torch.Generator())
    n = buffer.size()
    loss = model(same).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_a_training_step_calling_an_imported_draw_is_reported(
    tmp_path: Path,
) -> None:
    found = _findings(tmp_path, STEP)
    assert len(found) == 2, found
    assert "`ReplayBuffer.push_and_pop` in utils.py (`random.uniform`)" in found[0]
    assert "`add_noise` in utils.py (`torch.randn_like`)" in found[1]
    assert all("[needs-review]" in f for f in found)
    # init_weights runs in setup, alike on every process; size() draws nothing
    assert not any("init_weights" in f or "size" in f for f in found)


def test_a_model_of_another_module_whose_forward_draws(tmp_path: Path) -> None:
    body = """
vae = get_vae().to("cpu")
opt = torch.optim.Adam(vae.parameters())
loader = DataLoader(TensorDataset(x), batch_size=4)
for epoch in range(2):
    for (xb,) in loader:
        recon, mu, logvar = vae(xb)
        loss = ((recon - xb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    found = _findings(tmp_path, body)
    assert len(found) == 1, found
    assert "`VAE.forward` in models.py (`torch.randn_like`)" in found[0]


def test_loaders_whose_data_draws(tmp_path: Path) -> None:
    body = """
train_loader = get_training_dataloader(x)
test_loader = get_test_dataloader(x)
random_loader = get_random_data_loader(16)
jitter_loader = DataLoader(Jittered(x), batch_size=4)
plain_loader = DataLoader(dataset=Plain(x), batch_size=4)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for loader in (train_loader, jitter_loader, plain_loader):
    for xb in loader:
        loss = model(xb).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    found = _findings(tmp_path, body)
    assert len(found) == 2, found
    assert "`get_training_dataloader` in utils.py" in found[0]
    assert "RandomCrop" in found[0]
    assert "`Jittered.__getitem__` in utils.py (`numpy.random.rand`)" in found[1]


def test_no_project_no_finding(tmp_path: Path) -> None:
    # the same names, defined nowhere this run can read: nothing is claimed
    source = HEAD + STEP
    script = tmp_path / "alone" / "train.py"
    script.parent.mkdir()
    script.write_text(source)
    result = migrate_source(source, str(script), MigrateOptions())
    assert not [f for f in result.findings if f.code == "AM020"]
