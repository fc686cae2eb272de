"""A trainer class of another file whose optimizer is built over an attribute
holding the handed model's parameters (openai/improved-diffusion's
``TrainLoop``: ``self.model_params = list(self.model.parameters())``, then
``AdamW(self.model_params, ...)``; its step runs the model through
``diffusion.training_losses(self.model, ...)``): the caller prepares the model
it hands (``optimized_parameters`` follows the attribute), and a model it
cannot wrap (unpacked from a local function's tuple) stops the batch with
AM004 instead of running unprepared (the runtime's UnpreparedParametersError)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.handed_optimized import optimized_parameters
from accel_migrate.codemod.project_view import ProjectView

TRAINER = """\
import functools

from torch.optim import AdamW


class TrainLoop:
    def __init__(self, *, model, diffusion, data, lr):
        self.model = model
        self.diffusion = diffusion
        self.data = data
        self.model_params = list(self.model.parameters())
        self.master_params = self.model_params
        self.opt = AdamW(self.master_params, lr=lr)

    def run_step(self):
        batch = next(self.data)
        compute = functools.partial(self.diffusion.losses, self.model, batch)
        loss = compute().mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
"""

MAIN = """\
import torch
from torch import nn

from train_util import TrainLoop


class Diffusion:
    def losses(self, model, x):
        return (model(x) - x) ** 2


def create_model_and_diffusion():
    return nn.Linear(4, 4), Diffusion()


def batches():
    while True:
        yield torch.randn(8, 4)


{build}
loop = TrainLoop(model=model, diffusion=diffusion, data=batches(), lr=0.01)
for _ in range(3):
    loop.run_step()
"""

BUILDS = {
    "built here": "model = nn.Linear(4, 4)\ndiffusion = Diffusion()",
    "unpacked": "model, diffusion = create_model_and_diffusion()",
}


def test_the_optimized_parameter_is_followed_through_attributes() -> None:
    tree = ast.parse(TRAINER)
    cls = tree.body[-1]
    assert isinstance(cls, ast.ClassDef)
    found = optimized_parameters([cls], lambda c: ast.unparse(c.func) == "AdamW")
    assert found == (("model", -1),)


def _migrate(tmp_path: Path, build: str):
    (tmp_path / "train_util.py").write_text(TRAINER)
    script = tmp_path / "main.py"
    source = MAIN.format(build=build)
    script.write_text(source)
    view = ProjectView([str(script), str(tmp_path / "train_util.py")])
    options = MigrateOptions(project=view.facts_for(str(script)))
    return source, migrate_source(source, str(script), options)


def test_a_handed_model_built_here_is_prepared(tmp_path: Path) -> None:
    _, result = _migrate(tmp_path, BUILDS["built here"])
    assert "model = accel.prepare_model(nn.Linear(4, 4))" in result.output
    assert not [f for f in result.findings if f.status == "needs-review"]


@pytest.mark.parametrize("build", ["unpacked"])
def test_a_handed_model_that_cannot_be_wrapped_stops_the_file(
    tmp_path: Path, build: str
) -> None:
    source, result = _migrate(tmp_path, BUILDS[build])
    assert result.output == source  # left whole
    found = [f for f in result.findings if f.code == "AM004"]
    assert found and found[0].status == "needs-review", result.findings
    assert "in a form accel-migrate cannot wrap" in found[0].message
