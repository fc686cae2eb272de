"""Prefetcher classes that only pass a loader's batches on (``loader_wrappers``)."""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.codemod.loader_wrappers import loader_wrapper_classes

PREFETCHERS = """
import torch


class CPUPrefetcher:
    def __init__(self, dataloader):
        self.original_dataloader = dataloader
        self.data = iter(dataloader)

    def next(self):
        try:
            return next(self.data)
        except StopIteration:
            return None

    def reset(self):
        self.data = iter(self.original_dataloader)

    def __len__(self):
        return len(self.original_dataloader)


class CUDAPrefetcher(object):
    def __init__(self, dataloader, device):
        self.batch_data = None
        self.original_dataloader = dataloader
        self.device = device
        self.data = iter(dataloader)
        self.stream = torch.cuda.Stream()
        self.preload()

    def preload(self):
        try:
            self.batch_data = next(self.data)
        except StopIteration:
            self.batch_data = None
            return None
        with torch.cuda.stream(self.stream):
            for k, v in self.batch_data.items():
                if torch.is_tensor(v):
                    self.batch_data[k] = self.batch_data[k].to(self.device, non_blocking=True)

    def next(self):
        torch.cuda.current_stream().wait_stream(self.stream)
        batch_data = self.batch_data
        self.preload()
        return batch_data
"""


def _classes(source: str) -> frozenset[str]:
    return loader_wrapper_classes(ast.parse(textwrap.dedent(source)))


def test_prefetchers_pass_the_batches_on() -> None:
    assert _classes(PREFETCHERS) == {"CPUPrefetcher", "CUDAPrefetcher"}


@pytest.mark.parametrize(
    "body",
    [
        # counts what it hands on
        "self.seen += 1\n        return next(self.data)",
        # a sum over the batches
        "batch = next(self.data)\n        self.total = self.total + batch.sum()\n"
        "        return batch",
        # keeps the batches
        "batch = next(self.data)\n        self.kept.append(batch)\n        return batch",
        # logs
        "batch = next(self.data)\n        print(batch.shape)\n        return batch",
        # touches the sampler
        "self.loader.sampler.set_epoch(1)\n        return next(self.data)",
    ],
)
def test_a_class_that_computes_anything_over_them_is_not_one(body: str) -> None:
    source = (
        "class Prefetcher:\n"
        "    def __init__(self, loader):\n"
        "        self.loader = loader\n"
        "        self.data = iter(loader)\n\n"
        "    def next(self):\n"
        f"        {body}\n"
    )
    assert _classes(source) == frozenset()


def test_a_dataset_or_a_class_that_never_iterates_is_not_one() -> None:
    source = (
        "from torch.utils.data import Dataset\n\n"
        "class Wrapped(Dataset):\n"
        "    def __init__(self, loader):\n"
        "        self.data = iter(loader)\n\n"
        "class Holder:\n"
        "    def __init__(self, loader):\n"
        "        self.loader = loader\n"
    )
    assert _classes(source) == frozenset()


MAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from dataset import Prefetcher

data = TensorDataset(torch.randn(16, 2), torch.randn(16, 1))
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
prefetcher = Prefetcher(DataLoader(data, batch_size=4, shuffle=True))
for epoch in range(2):
    prefetcher.reset()
    batch = prefetcher.next()
    while batch is not None:
        x, y = batch
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        batch = prefetcher.next()
"""


def _batch(tmp_path: Path, prefetcher: str, capsys: pytest.CaptureFixture[str]) -> dict:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "dataset.py").write_text(prefetcher)
    (root / "main.py").write_text(MAIN)
    main(["--no-cache", "--output-format", "json", str(root)])
    report = json.loads(capsys.readouterr().out)
    return {Path(f["path"]).name: f for f in report["files"]}


def test_a_batch_that_hands_its_loader_to_a_prefetcher_is_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Lornatang's SRGAN-PyTorch layout: main.py hands its sharded loader to
    dataset.py's CPUPrefetcher, which only passes the batches back; the batch
    migrates main.py (as `accel-migrate main.py` alone does) with no AM103 and
    no needs-review finding about sums made in the prefetcher."""
    source = PREFETCHERS.replace("CPUPrefetcher", "Prefetcher")
    files = _batch(tmp_path, source, capsys)
    codes = [f["code"] for f in files["main.py"]["findings"]]
    assert files["main.py"]["status"] == "changed", files["main.py"]
    assert "AM103" not in codes
    assert not [
        f
        for f in files["main.py"]["findings"]
        if f["status"] == "needs-review" and "Prefetcher" in f["message"]
    ]


def test_a_batch_whose_wrapper_counts_the_batches_stays_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = PREFETCHERS.replace("CPUPrefetcher", "Prefetcher").replace(
        "            return next(self.data)\n",
        "            self.seen = self.seen + 1\n            return next(self.data)\n",
        1,
    )
    files = _batch(tmp_path, source, capsys)
    assert files["main.py"]["status"] == "unchanged"
    assert [f["code"] for f in files["main.py"]["findings"]] == ["AM103"]
