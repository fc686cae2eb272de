"""A model whose class is picked by name among a local module's (rev7 D2):
prepared only where every candidate is shown plain (``picked_models``)."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView

NETS = """\
import torch
import torch.nn as nn


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


class Jittered(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x + 0.05 * torch.randn(x.shape))
"""

SCRIPT = """\
import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

from nets import Jittered, Small

NETWORKS = {{"small": Small, {extra}}}

parser = argparse.ArgumentParser()
parser.add_argument("--net", default="small")
args = parser.parse_args()
model = NETWORKS[args.net]()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = DataLoader(TensorDataset(torch.randn(64, 4), torch.randn(64, 1)), batch_size=8)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _migrate(tmp_path: Path, extra: str):
    (tmp_path / "nets.py").write_text(NETS)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(extra=extra))
    facts = ProjectView([str(script)]).facts_for(str(script))
    return migrate_source(
        script.read_bytes(), str(script), MigrateOptions(project=facts)
    )


def test_a_registry_with_a_drawing_candidate_is_left_whole(tmp_path: Path) -> None:
    """``NETWORKS[args.net]()`` over a dict whose ``Jittered`` draws
    ``torch.randn`` in its forward (AM020 would report it by name): left whole,
    naming the candidate and the draw."""
    result = _migrate(tmp_path, '"jittered": Jittered')
    assert not result.changed
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review"
    assert blocking.line == 13
    assert blocking.message.startswith(
        "`model` is built by `NETWORKS[args.net]()` (line 13), a model class "
        "picked at run time by name from `NETWORKS`: of its candidates (`Small` "
        "in nets.py, `Jittered` in nets.py), not every one is shown free"
    )
    assert "`Jittered` in nets.py: `forward` draws `torch.randn`" in blocking.message


def test_a_registry_of_plain_candidates_is_prepared(tmp_path: Path) -> None:
    """The same registry with only plain classes (no fact beyond being a
    model): the model is prepared as a named one would be."""
    result = _migrate(tmp_path, '"also_small": Small')
    assert result.changed
    assert b"model = accel.prepare_model(NETWORKS[args.net]())" in result.output
    assert not [f for f in result.findings if f.status == "needs-review"]


def test_registry_values_wrapped_in_a_lambda_or_partial_are_read(
    tmp_path: Path,
) -> None:
    """``lambda: Jittered()`` and ``functools.partial(Jittered)`` name the class
    they build: a candidate like a plain value, not dropped."""
    for extra in (
        '"jittered": lambda: Jittered()',
        '"jittered": functools.partial(Jittered)',
    ):
        (tmp_path / "nets.py").write_text(NETS)
        script = tmp_path / "train.py"
        script.write_text("import functools\n" + SCRIPT.format(extra=extra))
        facts = ProjectView([str(script)]).facts_for(str(script))
        result = migrate_source(
            script.read_bytes(), str(script), MigrateOptions(project=facts)
        )
        assert not result.changed, extra
        (blocking,) = [f for f in result.findings if f.code == "AM004"]
        assert "`Jittered` in nets.py: `forward` draws `torch.randn`" in (
            blocking.message
        ), extra


def test_a_partial_of_a_plain_class_is_prepared(tmp_path: Path) -> None:
    result = _migrate(tmp_path, '"also_small": lambda: Small()')
    assert result.changed
    assert b"model = accel.prepare_model(NETWORKS[args.net]())" in result.output
