"""AM025 across files: a model class of a local module that keeps the
configured batch size and shapes a tensor with it in ``forward``
(``HelperFact.batch_shape``) is reported where the script builds it."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.project_view import read_project

MODELS = """\
import torch
import torch.nn as nn


class SeqClassifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.batch_size = cfg.batch_size
        self.seq_len = cfg.seq_len
        self.rnn = nn.GRU(3, 4, batch_first=True)

    def forward(self, x):
        x = x.view(self.batch_size, self.seq_len, -1)
        return self.rnn(x)[0][:, -1]


class Sized(nn.Module):
    def __init__(self, batch_size):
        super().__init__()
        self.bs = batch_size
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x) + torch.zeros((self.bs, 2))


class Plain(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.batch_size = cfg.batch_size
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x.view(x.size(0), -1))


def build_model(cfg):
    return SeqClassifier(cfg)
"""

SCRIPT = """\
import torch
from torch.utils.data import DataLoader

from models import Plain, Sized, build_model

loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True)
model = build_model(cfg)
other = Sized(cfg.batch_size)
plain = Plain(cfg)
opt = torch.optim.SGD(list(model.parameters()) + list(other.parameters())
                      + list(plain.parameters()), lr=0.1)
for x, y in loader:
    opt.zero_grad()
    (model(x).sum() + other(x).sum() + plain(x).sum()).backward()
    opt.step()
"""


def test_the_fact_names_the_shape_and_where_the_size_comes_from(
    tmp_path: Path,
) -> None:
    (tmp_path / "models.py").write_text(MODELS)
    probe = tmp_path / "probe.py"
    probe.write_text("import models\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["models.SeqClassifier"].batch_shape == (
        "`forward` shapes a tensor with `self.batch_size` (line 13), which "
        "`__init__` sets from `cfg.batch_size` (line 8)"
    )
    assert "`self.bs`" in table["models.Sized"].batch_shape
    assert table["models.Plain"].batch_shape == ""  # stored, never a shape
    assert table["models.build_model"].model_class is not None


def test_the_script_that_builds_it_is_told(tmp_path: Path) -> None:
    """The script shards its loader and prepares the models (each process's
    batch is half the configured size, and the reshape in models.py fails at
    world size 2): reported at each call that builds one of the two, through a
    factory too; the plain one is not."""
    (tmp_path / "models.py").write_text(MODELS)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    result = migrate_source(script.read_text(), str(script))
    found = [f for f in result.needs_review if f.code == "AM025"]
    assert [f.line for f in found] == [7, 8]
    assert found[0].message.startswith(
        "builds `SeqClassifier` in models.py, whose `forward` shapes a tensor with "
        "`self.batch_size` (line 13)"
    )


HIDDEN = """\
import torch
import torch.nn as nn


class HierAttNet(nn.Module):
    def __init__(self, hidden_size, batch_size):
        super().__init__()
        self.batch_size = batch_size
        self.hidden_size = hidden_size
        self.gru = nn.GRU(3, hidden_size, bidirectional=True)
        self._init_hidden_state()

    def _init_hidden_state(self, last_batch_size=None):
        if last_batch_size:
            batch_size = last_batch_size
        else:
            batch_size = self.batch_size
        self.hidden = torch.zeros(2, batch_size, self.hidden_size)

    def forward(self, x):
        out, self.hidden = self.gru(x, self.hidden)
        return out[-1]


class SizedByInput(nn.Module):
    def __init__(self, hidden_size, batch_size):
        super().__init__()
        self.batch_size = batch_size
        self.gru = nn.GRU(3, hidden_size)

    def init_hidden(self, bsz):
        return torch.zeros(1, bsz, 4)

    def forward(self, x):
        return self.gru(x, self.init_hidden(x.size(1)))[0][-1]
"""


def test_a_state_reset_method_shaped_by_the_stored_batch_size(
    tmp_path: Path,
) -> None:
    """The HAN's ``_init_hidden_state()``, called before every training batch,
    makes the GRUs' initial state with ``self.batch_size`` through a local
    alias: each process's share of the batch does not fit it (torch's "Expected
    hidden size (2, 2, 5), got [2, 4, 5]" at world size 2). A reset shaped by
    the size it is handed (the batch's own) is not the stored size."""
    (tmp_path / "models.py").write_text(HIDDEN)
    probe = tmp_path / "probe.py"
    probe.write_text("import models\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["models.HierAttNet"].batch_shape == (
        "`_init_hidden_state` shapes a tensor with `self.batch_size` (as "
        "`batch_size`, line 18), which `__init__` sets from `batch_size` (line 8)"
    )
    assert table["models.SizedByInput"].batch_shape == ""


def test_a_batch_size_kept_from_a_config_dict_is_read(tmp_path: Path) -> None:
    """r36a: TFT's `self.batch_size = config['batch_size']`, then
    `output.view(self.batch_size, -1, self.hidden_size)` in `forward`: not read
    before (a subscript), and the migrated run crashed with no finding once
    AM028 no longer left the file whole (tft_quantile_early_stop_t12c)."""
    (tmp_path / "tft.py").write_text(
        "import torch.nn as nn\n\n\n"
        "class TFT(nn.Module):\n"
        "    def __init__(self, config):\n"
        "        super().__init__()\n"
        "        self.batch_size = config['batch_size']\n"
        "        self.fc = nn.Linear(4, 4)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc(x).view(self.batch_size, -1, 2)\n"
    )
    probe = tmp_path / "probe.py"
    probe.write_text("import tft\n")
    fact = dict(read_project(str(probe)).helpers)["tft.TFT"].batch_shape
    assert fact == (
        "`forward` shapes a tensor with `self.batch_size` (line 11), which "
        "`__init__` sets from `config['batch_size']` (line 7)"
    )
