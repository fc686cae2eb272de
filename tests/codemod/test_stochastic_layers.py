"""AM027 across files (issue 12): a model class of a local module whose dropout
layers (its own, or those of a class it builds as a submodule, in any local
module) draw masks in train mode (``HelperFact.stochastic``) is reported where
a training script builds it, in file mode (helpers read, not written) and in
batch mode."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project

LAYERS = """\
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)

    def forward(self, x):
        return self.attn_dropout(self.proj(x))


class Encoder(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.p = p

    def forward(self, x):
        return self._mix(self.fc(x))

    def _mix(self, x):
        return F.dropout(x, p=self.p, training=self.training)


class Off(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.0)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return F.dropout(self.drop(self.fc(x)), 0.5, training=False)
"""

MODELS = """\
import torch.nn as nn

from layers import Attention, Encoder, Off


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attn = Attention(config)

    def forward(self, x):
        return self.attn(x)


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.blocks = nn.ModuleList([Block(config) for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.classifier = nn.Sequential(nn.Dropout(), nn.Linear(4, 2))

    def forward(self, x):
        return self.classifier(x)


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = Off()

    def forward(self, x):
        return self.body(x)


class SubHead(Head):
    pass


def build_model(cfg):
    return nn.Sequential(Encoder(cfg.dropout), Plain())


def build_plain():
    return Plain()


def jitter(x):
    return nn.functional.dropout(x, 0.1)


class Jittered(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return jitter(self.fc(x))


class PatchDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()

        def discriminator_block(in_filters, out_filters):
            return [nn.Conv2d(in_filters, out_filters, 3, 2, 1), nn.Dropout2d(0.25)]

        self.model = nn.Sequential(*discriminator_block(1, 4))

    def forward(self, img):
        return self.model(img)
"""

SCRIPT = """\
import torch
from torch.utils.data import DataLoader

from models import GPT, Plain, build_model

loader = DataLoader(train_set, batch_size=8, shuffle=True)
model = GPT(config)
other = build_model(cfg)
plain = Plain()
opt = torch.optim.SGD(list(model.parameters()) + list(other.parameters())
                      + list(plain.parameters()), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    (model(x).sum() + other(x).sum() + plain(x).sum()).backward()
    opt.step()
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "layers.py").write_text(LAYERS)
    (tmp_path / "models.py").write_text(MODELS)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    return script


def test_the_fact_names_the_innermost_layer_across_modules(tmp_path: Path) -> None:
    _project(tmp_path)
    probe = tmp_path / "probe.py"
    probe.write_text("import models\nimport layers\n")
    table = dict(read_project(str(probe)).helpers)
    # GPT -> Block -> Attention (layers.py): the layer and where it is
    assert table["models.GPT"].stochastic == (
        "`nn.Dropout(config.attn_pdrop)` in `Attention` (layers.py, line 9)"
    )
    assert table["models.Block"].stochastic == table["models.GPT"].stochastic
    # nn.Dropout() in a Sequential display, default probability
    assert table["models.Head"].stochastic.startswith("`nn.Dropout()` in `Head`")
    # derived from a class that has one
    assert table["models.SubHead"].stochastic == table["models.Head"].stochastic
    # functional dropout in a method forward calls, its probability from a
    # parameter (unknown: still reported)
    assert table["layers.Encoder"].stochastic.startswith(
        "`F.dropout(x, p=self.p, training=self.training)` in `Encoder`"
    )
    # a factory that builds one
    assert table["models.build_model"].stochastic == table["layers.Encoder"].stochastic
    # a module-level function of its module that forward calls
    assert table["models.Jittered"].stochastic == (
        "`nn.functional.dropout(x, 0.1)` in `jitter` (models.py, line 57)"
    )
    # built by a function nested in __init__ (PyTorch-GAN's discriminator_block)
    assert table["models.PatchDiscriminator"].stochastic == (
        "`nn.Dropout2d(0.25)` in `PatchDiscriminator` (models.py, line 74)"
    )
    # p written as 0, training=False: no masks drawn
    assert table["layers.Off"].stochastic == ""
    assert table["models.Plain"].stochastic == ""
    assert table["models.build_plain"].stochastic == ""


def test_a_script_migrated_alone_is_told_where_it_builds_one(tmp_path: Path) -> None:
    """File mode: the helpers are read, not written; the script shards its
    loader, so each process draws its own masks for its share."""
    script = _project(tmp_path)
    result = migrate_source(script.read_text(), str(script))
    found = [f for f in result.findings if f.code == "AM027"]
    assert [(f.line, f.status) for f in found] == [(7, "info"), (8, "info")]
    assert found[0].message.startswith(
        "`GPT` in models.py builds a model with dropout (`nn.Dropout("
        "config.attn_pdrop)` in `Attention` (layers.py, line 9)): in train mode, "
        "where its probability is above 0, each process draws its own dropout masks"
    )
    assert "`build_model` in models.py" in found[1].message
    assert "prepare_dataloader" in result.output  # still migrated: info only


def test_batch_mode_reports_it_in_the_file_that_builds_the_model(
    tmp_path: Path,
) -> None:
    script = _project(tmp_path)
    files = [str(tmp_path / n) for n in ("layers.py", "models.py", "main.py")]
    view = ProjectView(files)
    facts = view.facts_for(str(script))
    assert facts.lookup(["models.GPT"]).stochastic  # type: ignore[union-attr]
    result = migrate_source(
        script.read_text(), str(script), MigrateOptions(project=facts)
    )
    assert [f.line for f in result.findings if f.code == "AM027"] == [7, 8]
    for name in ("layers.py", "models.py"):
        path = tmp_path / name
        helper = migrate_source(
            path.read_text(),
            str(path),
            MigrateOptions(project=view.facts_for(str(path))),
        )
        assert not [f for f in helper.findings if f.code == "AM027"]


def test_a_file_that_does_not_train_is_not_told(tmp_path: Path) -> None:
    _project(tmp_path)
    script = tmp_path / "export.py"
    script.write_text("from models import GPT\n\nmodel = GPT(config)\nprint(model)\n")
    result = migrate_source(script.read_text(), str(script))
    assert not [f for f in result.findings if f.code == "AM027"]
