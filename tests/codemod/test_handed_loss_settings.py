"""A ``torch.nn`` loss module whose mean is over a count that differs between
processes, built in ``main()`` and handed in as a parameter (seq2seq tutorials:
``criterion = nn.CrossEntropyLoss(ignore_index=pad_idx)`` passed to
``train(model, loader, optimizer, criterion, epoch)``; trainers keeping
``nn.CrossEntropyLoss(weight=class_weights)`` as ``self.criterion``). Round fx37b:
AM007 took the call for a mean over samples and wrote ``accel.backward(loss)``
(SILENT: each process's token mean weighted by its share of samples, not of
tokens). It now reads as the same module built beside its call: the count,
with the settings read off the module where ``main()``'s names are not in scope."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

PAD = 0


def train(model, loader, optimizer, criterion, epoch):
    for src, tgt in loader:
        optimizer.zero_grad()
        loss = criterion(model(src).reshape(-1, 9), tgt.reshape(-1))
        loss.backward()
        optimizer.step()
        print(loss.item())


def main(pad_idx, class_weights, mode):
    x = torch.randint(0, 9, (32, 5))
    loader = DataLoader(TensorDataset(x, x), batch_size=8)
    model = nn.Sequential(nn.Embedding(9, 4), nn.Linear(4, 9))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = BUILD
    for epoch in range(2):
        train(model, loader, optimizer, criterion, epoch)
"""

TRAINER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, loader, optimizer, criterion):
        self.model = model
        self.loader = loader
        self.optimizer = optimizer
        self.criterion = criterion

    def train_epoch(self):
        for x, y in self.loader:
            self.optimizer.zero_grad()
            loss = self.criterion(self.model(x), y)
            loss.backward()
            self.optimizer.step()


def main():
    x, y = torch.randn(32, 5), torch.randint(0, 3, (32,))
    class_weights = 1.0 / torch.bincount(y, minlength=3).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=8)
    model = nn.Linear(5, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer = Trainer(model, loader, optimizer, nn.CrossEntropyLoss(weight=class_weights))
    trainer.train_epoch()
"""


def _am007(source: str) -> tuple[str, list]:
    result = migrate_source(source)
    code = str(result.output).split("def main", 1)[0]
    return code, [f for f in result.findings if f.code == "AM007"]


@pytest.mark.parametrize(
    ("build", "count"),
    [
        # main()'s pad_idx is not train()'s: read off the module
        ("nn.CrossEntropyLoss(ignore_index=pad_idx)", "criterion.ignore_index"),
        # a module-level name is the same at the call: kept as written
        ("nn.CrossEntropyLoss(ignore_index=PAD)", "PAD"),
        ("nn.NLLLoss(ignore_index=-1)", "-1"),
        (
            "nn.CrossEntropyLoss(ignore_index=pad_idx).to('cpu')",
            "criterion.ignore_index",
        ),
    ],
)
def test_handed_token_mean_writes_the_count(build: str, count: str) -> None:
    code, findings = _am007(SCRIPT.replace("BUILD", build))
    assert f"count=(tgt.reshape(-1) != {count}).sum()" in code
    assert [f.status for f in findings] == ["fixed"]
    assert "ignore_index" in findings[0].message


def test_handed_class_weights_write_the_count() -> None:
    code, findings = _am007(
        SCRIPT.replace("BUILD", "nn.CrossEntropyLoss(weight=class_weights)")
    )
    assert "accel.class_weight_count(criterion.weight, tgt.reshape(-1))" in code
    assert [f.status for f in findings] == ["fixed"]


def test_trainer_attribute_reads_its_module() -> None:
    code, findings = _am007(TRAINER)
    assert "accel.class_weight_count(self.criterion.weight, y)" in code
    assert [f.status for f in findings] == ["fixed"]


def test_token_mean_or_mean_chosen_at_run_time_names_both() -> None:
    build = (
        "nn.CrossEntropyLoss()\n"
        "    if mode:\n"
        "        criterion = nn.CrossEntropyLoss(ignore_index=pad_idx)"
    )
    code, findings = _am007(SCRIPT.replace("BUILD", build))
    assert "count=" not in code
    assert [f.status for f in findings] == ["needs-review"]
    message = findings[0].message
    assert "`nn.CrossEntropyLoss(ignore_index=pad_idx)` (built in `main`)" in message
    assert "chosen at run time" in message


def test_handed_plain_mean_stays_a_mean() -> None:
    code, findings = _am007(SCRIPT.replace("BUILD", "nn.CrossEntropyLoss()"))
    assert "accel.backward(loss)\n" in code
    assert [f.status for f in findings] == ["fixed"]


@pytest.mark.parametrize(
    ("build", "said"),
    [
        (
            "nn.CrossEntropyLoss(ignore_index=pad_idx, reduction=mode)",
            "reduction=`mode`",
        ),
        ("nn.CrossEntropyLoss(ignore_index=pad_idx)", "cannot be written"),
    ],
)
def test_unprovable_handed_module_names_where_it_was_built(
    build: str, said: str
) -> None:
    # a target that calls a function cannot be read again at the backward
    source = SCRIPT.replace("BUILD", build).replace(
        "tgt.reshape(-1))", "tgt.reshape(-1) + torch.randint(0, 1, (1,)))"
    )
    code, findings = _am007(source)
    assert "count=" not in code
    assert [f.status for f in findings] == ["needs-review"]
    assert said in findings[0].message
    assert f"(`{build}`, built in `main`)" in findings[0].message
