"""AM039 across files: a model class of a local module whose ``forward`` (or a
class of the project it builds) runs a submodule only when its batch says so
(``HelperFact.data_branch``) stops the migration where the script builds it."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

BLOCKS = """\
import torch.nn as nn


class MLPBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.bn = nn.BatchNorm1d(dim)

    def forward(self, x):
        h = self.fc(x)
        if h.size(0) > 1:
            h = self.bn(h)
        return h.relu()
"""

MODELS = """\
import torch.nn as nn

from blocks import MLPBlock


class CascadeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 8)
        self.classifier = nn.Linear(8, 3)
        self.refiner = nn.Linear(8, 3)

    def forward(self, x):
        h = self.encoder(x)
        logits = self.classifier(h)
        hard = logits.softmax(-1).max(-1).values < 0.5
        if hard.any():
            logits = logits + self.refiner(h) * hard.unsqueeze(1)
        return logits


class Tabular(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = MLPBlock(4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.block(x))


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.proj = nn.Linear(3, 4)

    def forward(self, x, with_proj=False):
        if x.size(1) == 3 or with_proj:
            x = self.proj(x)
        return self.fc(x)


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.dec = nn.Linear(4, 4)
        self.fc = nn.Linear(4, 2)

    def embed(self, x, apply_masking):
        if apply_masking:
            return self.dec(x)
        return self.enc(x)

    def forward(self, x):
        return self.fc(self.embed(x, apply_masking=False) + self.embed(x, True))


class MaskedByBatch(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4)
        self.dec = nn.Linear(4, 4)

    def embed(self, x, apply_masking):
        if apply_masking:
            return self.dec(x)
        return self.enc(x)

    def forward(self, x):
        return self.embed(x, apply_masking=False) + self.embed(x, x.sum() > 0)


def build_model(name):
    return CascadeNet()
"""

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from models import {model}

loader = DataLoader(train_set, batch_size=8, shuffle=True)
model = {model}().to("cpu")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
"""


def _project(tmp_path: Path) -> None:
    (tmp_path / "blocks.py").write_text(BLOCKS)
    (tmp_path / "models.py").write_text(MODELS)


def test_the_fact_names_the_branch_its_line_and_the_built_class(
    tmp_path: Path,
) -> None:
    _project(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text("import models\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["models.CascadeNet"].data_branch == (
        "`CascadeNet.forward` (models.py, line 17) runs `self.refiner(...)` only "
        "when `hard.any()` says so"
    )
    # through the class it builds, in a third module; on the batch's row count
    assert table["models.Tabular"].data_branch == (
        "`MLPBlock.forward` (blocks.py, line 12) runs `self.bn(...)` only when "
        "`h.size(0) > 1` says so (`Tabular` builds `MLPBlock`)"
    )
    # another size of the batch, and a flag with a default: the same everywhere
    assert table["models.Plain"].data_branch == ""
    # a parameter every `self.embed(...)` call passes a literal (TFT's
    # `apply_masking`, t12c: was "a condition on its batch")
    assert table["models.Masked"].data_branch == ""
    # ... but not where a call passes a value of the batch
    assert table["models.MaskedByBatch"].data_branch.startswith("`MaskedByBatch.embed`")
    assert table["models.build_model"].model_class.data_branch.startswith(
        "`CascadeNet.forward`"
    )


def test_the_script_that_builds_it_is_left_unchanged(tmp_path: Path) -> None:
    _project(tmp_path)
    for model, line in (("CascadeNet", 8), ("Tabular", 8), ("build_model", 8)):
        script = tmp_path / "main.py"
        source = SCRIPT.format(model=model)
        script.write_text(source)
        result = migrate_source(source, str(script))
        found = [f for f in result.needs_review if f.code == "AM039"]
        assert [f.line for f in found] == [line], model
        assert result.output == source, model
        assert "DDP's gradient exchange then aborts or hangs" in found[0].message


def test_a_model_that_branches_on_other_sizes_is_migrated(tmp_path: Path) -> None:
    _project(tmp_path)
    script = tmp_path / "main.py"
    source = SCRIPT.format(model="Plain")
    script.write_text(source)
    result = migrate_source(source, str(script))
    assert not [f for f in result.needs_review if f.code == "AM039"]
    assert "accel.prepare_model(" in result.output
