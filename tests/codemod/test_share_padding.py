"""A model of a local module that unpacks an RNN's output to its batch's longest
sequence (BiDAF-pytorch's ``LSTM`` in utils/nn.py: ``pad_packed_sequence(
x_packed, batch_first=True)``, span logits over the positions): after
migration each process pads to its share's longest, and a softmax over the
positions changes. AM037 reports it where the training file builds the model
and shards a loader (``HelperFact.share_padded``, ``share_padding.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import read_project

LAYERS = """
import torch.nn as nn


class LSTM(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.rnn = nn.LSTM(size, size, batch_first=True)

    def forward(self, x, x_len):
        packed = nn.utils.rnn.pack_padded_sequence(x, x_len, batch_first=True, enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True{total})
        return out
"""

MODEL = """
import torch.nn as nn

from layers import LSTM


class SpanModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.rnn = LSTM(4)
        self.start = nn.Linear(4, 1)

    def forward(self, words, lengths):
        return self.start(self.rnn(self.emb(words), lengths)).squeeze(-1)
"""

MAIN = """
import torch
from torch.utils.data import DataLoader

from model import SpanModel


def collate(batch):
    lengths = torch.tensor([len(s) for s, _ in batch])
    words = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long)
    for i, (s, _) in enumerate(batch):
        words[i, : len(s)] = torch.tensor(s)
    return words, lengths, torch.tensor([t for _, t in batch])


data = [([1, 2, 3], 0), ([4, 5], 1), ([6], 0), ([7, 8, 9, 1], 2)]
loader = DataLoader(data, batch_size=2, collate_fn=collate)
model = SpanModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for words, lengths, start in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(words, lengths), start)
    loss.backward()
    optimizer.step()
"""


def _findings(tmp_path: Path, total: str) -> list:
    (tmp_path / "layers.py").write_text(LAYERS.format(total=total))
    (tmp_path / "model.py").write_text(MODEL)
    main = tmp_path / "main.py"
    main.write_text(MAIN)
    facts = read_project(str(main))
    result = migrate_source(main.read_bytes(), str(main), MigrateOptions(project=facts))
    return [f for f in result.findings if f.code == "AM037"]


@pytest.mark.parametrize("total", ["", ", total_length=int(x_len.max())"])
def test_unpacking_to_the_batchs_longest_is_reported(
    tmp_path: Path, total: str
) -> None:
    findings = _findings(tmp_path, total)
    assert len(findings) == 1, findings
    message = findings[0].message
    assert findings[0].status == "needs-review"
    assert "`LSTM.forward` unpacks with `pad_packed_sequence`" in message
    assert "(layers.py line 13)" in message
    assert "total_length=" in message


def test_unpacking_to_the_inputs_padded_length_is_not(tmp_path: Path) -> None:
    assert _findings(tmp_path, ", total_length=x.size(1)") == []


def test_the_fact_follows_the_layer_class_into_the_model(tmp_path: Path) -> None:
    (tmp_path / "layers.py").write_text(LAYERS.format(total=""))
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "main.py").write_text(MAIN)
    helpers = dict(read_project(str(tmp_path / "main.py")).helpers)
    assert "`LSTM.forward`" in helpers["model.SpanModel"].share_padded
