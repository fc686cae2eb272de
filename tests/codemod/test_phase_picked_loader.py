"""A loop over a loader picked by a conditional expression
(tugstugi/mongolian-speech-recognition's train.py: one ``train(epoch, phase)``
for both phases with ``data_loader = train_data_loader if phase == 'train' else
valid_data_loader``). Round t17a: the loop was not taken for a loader loop, so
AM009 left ``total_cer += cer`` this process's share while both loaders were
sharded (mbspeech_ctc_phase_t17a_project: the validation CER printed at world 2
was rank 0's half, and no finding named it)."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

train_loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randint(0, 3, (8,))), batch_size=4)
valid_loader = DataLoader(TensorDataset(torch.randn(8, 3), torch.randint(0, 3, (8,))), batch_size=4)
model = nn.Linear(3, 3)
optimizer = torch.optim.Adam(model.parameters())


def run(phase="train"):
    data_loader = PICK
    total_err = 0
    for x, y in data_loader:
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        if phase == "train":
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        else:
            pred = out.argmax(1)
            err = 0
            for i in range(len(y)):
                err += float(int(pred[i]) != int(y[i]))
            total_err += err
    print("eval", total_err / 8)


run("train")
run("valid")
"""


def _am009(pick: str) -> tuple[str, list[str]]:
    result = migrate_source(SCRIPT.replace("PICK", pick))
    return str(result.output), [
        f"{f.status} {f.message}" for f in result.findings if f.code == "AM009"
    ]


def test_loop_over_either_loader_reduces_its_sums() -> None:
    output, found = _am009('train_loader if phase == "train" else valid_loader')
    assert "    total_err = accel.reduce(total_err)\n" in output
    assert found == ["fixed `total_err` -> accel.reduce(total_err) after the loop"]


def test_loop_over_a_loader_or_a_list_is_no_loader_loop() -> None:
    output, found = _am009('train_loader if phase == "train" else [(1, 2)]')
    assert "accel.reduce(total_err)" not in output
    assert found == []
