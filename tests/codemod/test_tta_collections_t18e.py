"""Shapes of Kaggle competition solutions (t18e, the SIIM-ISIC melanoma 1st-place
train.py): TTA logits summed into ``torch.zeros((data.shape[0], k))`` and
collected per batch are outputs (AM029 gathers them), not sums of rows for
AM009 to reduce; and a batch-mean loss collected as ``loss.detach().cpu().numpy()``
is made the whole batch's below the ``.numpy()`` (``accel.global_loss`` takes a
tensor, never an array)."""

from __future__ import annotations

from accel_migrate.codemod import MigrateOptions, migrate_source

SCRIPT = """
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cpu")
model = nn.Linear(4, 3).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
data = TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32,)))
train_loader = DataLoader(data, batch_size=8, shuffle=True)
valid_loader = DataLoader(data, batch_size=8)


def val_epoch(model, loader, n_test=2):
    model.eval()
    val_loss = []
    LOGITS = []
    PROBS = []
    with torch.no_grad():
        for (x, target) in loader:
            x, target = x.to(device), target.to(device)
            logits = torch.zeros((x.shape[0], 3)).to(device)
            probs = torch.zeros((x.shape[0], 3)).to(device)
            for I in range(n_test):
                l = model(x.flip(1) if I else x)
                logits += l
                probs += l.softmax(1)
            logits /= n_test
            probs /= n_test
            LOGITS.append(logits.detach().cpu())
            PROBS.append(probs.detach().cpu())
            loss = criterion(logits, target)
            val_loss.append(loss.detach().cpu().numpy())
    val_loss = np.mean(val_loss)
    PROBS = torch.cat(PROBS).numpy()
    return val_loss, PROBS


for epoch in range(2):
    model.train()
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    val_loss, probs = val_epoch(model, valid_loader)
    print("eval", val_loss, probs.mean())
"""


def _migrated() -> tuple[str, list[str]]:
    result = migrate_source(SCRIPT, "train.py", MigrateOptions())
    assert isinstance(result.output, str)
    return result.output, [f"{f.code} {f.status} {f.message}" for f in result.findings]


def test_tta_logits_filled_from_zeros_are_gathered_not_reduced() -> None:
    code, findings = _migrated()
    assert "accel.reduce(logits" not in code
    assert "accel.reduce(probs" not in code
    assert "LOGITS = accel.gather_in_order(LOGITS, loader, per_batch=True)" in code
    assert "PROBS = accel.gather_in_order(PROBS, loader, per_batch=True)" in code
    assert not [f for f in findings if f.startswith("AM009") and "LOGITS" in f]


def test_a_collected_numpy_loss_is_combined_as_its_tensor() -> None:
    code, _ = _migrated()
    assert "val_loss.append(accel.global_loss(loss).detach().cpu().numpy())" in code
    assert "accel.global_loss(loss.detach().cpu().numpy())" not in code
