"""dataset_sized.py: tensors with one entry per sample of a sharded loader's
dataset, filled by position (dlwpt-code's LunaTrainingApp metrics)."""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod.analysis import ModuleIndex
from accel_migrate.codemod.dataset_sized import dataset_sized_fills

HEAD = """
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
"""


def _fills(body: str) -> list[tuple[str, str, str]]:
    index = ModuleIndex(MetadataWrapper(cst.parse_module(HEAD + body)), "accel")
    return [
        (f.name, f.loader, type(f.fill).__name__) for f in dataset_sized_fills(index)
    ]


def test_handed_to_a_function_that_writes_by_position() -> None:
    body = """
def fill(i, batch, out):
    out[0, i * 4 : i * 4 + len(batch[0])] = batch[0][:, 0]

def epoch(dl):
    metrics = torch.zeros(2, len(dl.dataset)).to("cpu")
    for i, batch in enumerate(dl):
        fill(i, batch, metrics)
    return metrics.mean()

epoch(loader)
"""
    assert _fills(body) == [("metrics", "dl", "Call")]


def test_written_in_the_function_that_makes_it() -> None:
    body = """
def predict(dl):
    preds = np.zeros(len(dl.dataset))
    for i, (x,) in enumerate(dl):
        preds[i * 4 : i * 4 + len(x)] = x[:, 0].numpy()
    return preds

predict(loader)
"""
    assert _fills(body) == [("preds", "dl", "Subscript")]


def test_only_read_or_not_a_loader_is_not_one() -> None:
    body = """
def stats(dl, table):
    lengths = torch.zeros(len(dl.dataset))
    other = torch.zeros(len(table.dataset))
    other[0] = 1.0
    for (x,) in dl:
        print(x.sum() + lengths.sum())

stats(loader, object())
"""
    assert _fills(body) == []
