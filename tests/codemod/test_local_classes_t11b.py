"""A script that trains with an optimizer class of a local module deriving from
``torch.optim.Optimizer`` and steps it by methods of its own (davda54/sam's
``SAM``: ``first_step`` / ``second_step``, never ``step()``) is a training file
(``HelperFact.optimizer_subclass``, ``ProjectFacts.builds_local_optimizer``):
its model and that optimizer are prepared, where before it was skipped as "not
a training entry point" with no finding. A ``.train(...)`` call whose arguments
cannot bind to nn.Module's ``train(mode)`` (SAM's ``log.train(len_dataset=...)``
on its Log) is no evidence of a model for AM004. And an instance of a local
class whose ``__call__`` draws (torchvision references' transforms.py kept in a
project), built in a file that builds a loader, is reported by AM020 as
torchvision's random augmentations are."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.findings import SKIP_NOT_TRAINING
from accel_migrate.codemod.project_view import read_project

SAM = """import torch


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.state[p]["old_p"] = p.data.clone()
                    p.add_(p.grad * group["rho"])
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.data = self.state[p]["old_p"]
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()
"""

LOG = """class Log:
    def __init__(self, log_each):
        self.log_each = log_each

    def train(self, len_dataset):
        self.len_dataset = len_dataset
"""

MAIN = """import torch
import torch.nn.functional as F

from log import Log
from sam import SAM

model = torch.nn.Linear(4, 3)
optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.1)
log = Log(log_each=2)
data = [(torch.randn(8, 4), torch.randint(0, 3, (8,)))]
for epoch in range(2):
    model.train()
    log.train(len_dataset=len(data))
    for inputs, targets in data:
        F.cross_entropy(model(inputs), targets).backward()
        optimizer.first_step(zero_grad=True)
        F.cross_entropy(model(inputs), targets).backward()
        optimizer.second_step(zero_grad=True)
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "sam.py").write_text(SAM)
    (tmp_path / "log.py").write_text(LOG)
    main = tmp_path / "main.py"
    main.write_text(MAIN)
    return main


def test_the_optimizer_subclass_is_a_fact_of_its_module(tmp_path: Path) -> None:
    main = _project(tmp_path)
    facts = read_project(str(main))
    assert facts.builds_local_optimizer
    sam = facts.lookup({"sam.SAM"})
    assert sam is not None and sam.optimizer_subclass
    log = facts.lookup({"log.Log"})
    assert log is not None and not log.optimizer_subclass


def test_a_script_stepping_it_by_its_own_methods_is_migrated(tmp_path: Path) -> None:
    main = _project(tmp_path)
    result = migrate_source(MAIN, str(main))
    assert result.skip_reason != SKIP_NOT_TRAINING
    output = str(result.output)
    assert "model = accel.prepare_model(torch.nn.Linear(4, 3))" in output
    assert (
        "optimizer = accel.prepare_optimizer(\n"
        "    SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.1)\n)" in output
    )
    # `log.train(len_dataset=...)` is the Log's method, not nn.Module.train
    assert not any("`log` is a model" in f.message for f in result.findings)


def test_without_the_local_module_it_is_still_skipped(tmp_path: Path) -> None:
    main = tmp_path / "main.py"
    main.write_text(MAIN)
    result = migrate_source(MAIN, str(main))
    assert result.skip_reason == SKIP_NOT_TRAINING
    assert result.output == MAIN


TRANSFORMS = """import random


class RandomHorizontalFlip:
    def __init__(self, flip_prob):
        self.flip_prob = flip_prob

    def __call__(self, image, target):
        if random.random() < self.flip_prob:
            image, target = image.flip(-1), target.flip(-1)
        return image, target


class Normalize:
    def __init__(self, mean):
        self.mean = mean

    def __call__(self, image, target):
        return image - self.mean, target
"""

SEGMENTATION = """import torch
import transforms as T


def get_transform(train):
    if train:
        return T.RandomHorizontalFlip(0.5)
    return T.Normalize(0.5)


model = torch.nn.Conv2d(3, 4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
dataset = make_dataset(transforms=get_transform(True))
loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True)
for image, target in loader:
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(image), target).backward()
    optimizer.step()
"""


def test_a_local_transform_that_draws_is_reported_where_it_is_built(
    tmp_path: Path,
) -> None:
    (tmp_path / "transforms.py").write_text(TRANSFORMS)
    main = tmp_path / "main.py"
    main.write_text(SEGMENTATION)
    result = migrate_source(SEGMENTATION, str(main))
    draws = [f for f in result.findings if f.code == "AM020"]
    assert [(f.line, f.status) for f in draws] == [(7, "needs-review")]
    assert "`RandomHorizontalFlip.__call__` in transforms.py (`random.random`)" in (
        draws[0].message
    )


QAT = """import torch
import torch.ao.quantization

model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.ReLU())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model.qconfig = torch.ao.quantization.get_default_qat_qconfig("qnnpack")
torch.ao.quantization.prepare_qat(model, inplace=True)
loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
for x, y in loader:
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
"""


def test_quantization_aware_training_is_left_whole(tmp_path: Path) -> None:
    main = tmp_path / "main.py"
    main.write_text(QAT)
    result = migrate_source(QAT, str(main))
    assert result.output == QAT
    swaps = [f for f in result.findings if f.code == "AM004"]
    assert [(f.line, f.status) for f in swaps] == [(7, "needs-review")]
    assert swaps[0].message.startswith(
        "`torch.ao.quantization.prepare_qat` swaps the model's modules"
    )
    assert "observers" in swaps[0].message
