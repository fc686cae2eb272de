"""A dict made before the loop over a loader and handed to a function of the
file that adds each batch's terms into it (usuyama/pytorch-unet's
``calc_loss(pred, target, metrics)``) holds this process's share: AM009
reports it, and leaves the count it is divided by uncombined too (and every
other term of a ratio with that count), so the printed mean is this process's
own rather than its share's sum over the whole data's count."""

from __future__ import annotations

from pathlib import Path

from accel_migrate.codemod import migrate_source

UNET = """
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader


def calc_loss(pred, target, metrics, bce_weight=0.5):
    bce = F.binary_cross_entropy_with_logits(pred, target)
    metrics["bce"] += bce.item() * target.size(0)
    return bce


def remember(pred, last):
    last["pred"] = pred.detach()


def decay(optimizer):
    optimizer.param_groups[0]["lr"] *= 0.5


model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=8)
for epoch in range(2):
    metrics = defaultdict(float)
    last = {}
    epoch_samples = 0
    hits = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        loss = calc_loss(out, y, metrics)
        remember(out, last)
        decay(optimizer)
        loss.backward()
        optimizer.step()
        hits += (out > 0).float().sum().item()
        epoch_samples += x.size(0)
    print("bce", metrics["bce"] / epoch_samples)
    print("hits", hits / epoch_samples)
"""


def _migrate(tmp_path: Path, text: str):
    path = tmp_path / "train.py"
    path.write_text(text)
    return migrate_source(path.read_bytes(), str(path))


def test_a_dict_a_helper_adds_into_is_reported_with_its_ratio(tmp_path: Path) -> None:
    result = _migrate(tmp_path, UNET)
    out = result.output.decode()  # type: ignore[union-attr]
    handed = [
        f
        for f in result.findings
        if f.code == "AM009" and "`metrics` is handed to `calc_loss`" in f.message
    ]
    assert len(handed) == 1 and handed[0].status == "needs-review"
    # the count `metrics` is divided by is left alone, and so is `hits`, the
    # other term of a ratio with that count: each ratio is this process's own
    assert "accel.reduce(epoch_samples)" not in out
    assert "accel.reduce(hits)" not in out
    reasons = {
        f.message.split("`")[1]
        for f in result.findings
        if f.code == "AM009" and "is a term of" in f.message
    }
    assert reasons == {"epoch_samples", "hits"}
    # `remember` keeps the last value (a plain assignment): no accumulation
    assert not any("handed to `remember`" in f.message for f in result.findings)
    # an optimizer whose lr a helper scales in place is no accumulator
    assert not any("handed to `decay`" in f.message for f in result.findings)
    assert "accel.backward(loss)" in out


def test_without_the_handed_dict_the_ratio_is_combined(tmp_path: Path) -> None:
    text = UNET.replace(
        "loss = calc_loss(out, y, metrics)", "loss = calc_loss(out, y, {})"
    )
    result = _migrate(tmp_path, text)
    out = result.output.decode()  # type: ignore[union-attr]
    assert "accel.reduce(epoch_samples)" in out and "accel.reduce(hits)" in out
