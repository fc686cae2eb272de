"""AM006 leaves a DataLoader the runtime cannot shard unwrapped, with a needs-review
finding (codemod/unshardable.py), and no rule combines sums over it."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

HEAD = (
    "import torch\n"
    "from torch.utils.data import DataLoader, IterableDataset, TensorDataset\n"
    "model = torch.nn.Linear(4, 1)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "class Stream(IterableDataset):\n"
    "    def __iter__(self):\n"
    "        yield torch.ones(4)\n"
    "class Shuffled(Stream):\n"
    "    pass\n"
    "class Table(torch.utils.data.Dataset):\n"
    "    def __getitem__(self, i):\n"
    "        return torch.ones(4)\n"
    "    def __len__(self):\n"
    "        return 8\n"
)
LOOP = "for x in loader:\n    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n"


def am006(loader_line: str) -> tuple[str, str, str]:
    result = migrate_source(HEAD + loader_line + LOOP, "train.py")
    [finding] = [f for f in result.findings if f.code == "AM006"]
    return finding.status, finding.message, str(result.output)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        (
            "loader = DataLoader(Stream(), batch_size=4)\n",
            "(Stream, a class of this file)",
        ),
        (
            "loader = DataLoader(dataset=Shuffled(), batch_size=4)\n",
            "(Shuffled, a class",
        ),
        ("ds = Stream()\nloader = DataLoader(ds, batch_size=4)\n", "(Stream, a class"),
        (
            "ds = Stream() if len([]) else Table()\nloader = DataLoader(ds, 4)\n",
            "on one branch of an if-else",
        ),
        (
            "loader = DataLoader(torch.utils.data.ChainDataset([Stream()]))\n",
            "(ChainDataset)",
        ),
        (
            "import torchtext\nloader = DataLoader(torchtext.datasets.AG_NEWS(split='train'))\n",
            "(AG_NEWS)",
        ),
        (
            "import datasets\nloader = DataLoader(datasets.load_dataset('c4', streaming=True))\n",
            "streaming=True",
        ),
        (
            "import webdataset as wds\nloader = DataLoader(wds.WebDataset('shards.tar'))\n",
            "(WebDataset)",
        ),
    ],
)
def test_an_iterable_dataset_is_reported_not_wrapped(line: str, named: str) -> None:
    status, message, output = am006(line)
    assert status == "needs-review"
    assert message.startswith("DataLoader over an IterableDataset ")
    assert named in message
    assert "its samples have no index to split by" in message
    assert "accel.prepare_dataloader(DataLoader" not in output


@pytest.mark.parametrize(
    "line",
    [
        "loader = DataLoader(Table(), batch_size=None)\n",
        "loader = DataLoader(Table(), None)\n",
    ],
)
def test_batch_size_none_is_reported_not_wrapped(line: str) -> None:
    status, message, output = am006(line)
    assert status == "needs-review"
    assert message.startswith("DataLoader(batch_size=None) yields single samples")
    assert "accel.prepare_dataloader(" not in output


@pytest.mark.parametrize(
    "line",
    [
        "loader = DataLoader(Table(), batch_size=4)\n",
        "loader = DataLoader(TensorDataset(torch.ones(8, 4)), batch_size=4)\n",
        "ds = Table()\nloader = DataLoader(ds, batch_size=4)\n",
    ],
)
def test_a_map_style_loader_is_still_wrapped(line: str) -> None:
    status, _, output = am006(line)
    assert status == "fixed"
    assert "accel.prepare_dataloader(DataLoader(" in output


def test_sums_over_an_unsharded_loader_are_not_combined() -> None:
    # Every process reads all of it: reducing its sum would count it twice.
    source = HEAD + (
        "loader = DataLoader(Stream(), batch_size=4)\n" + LOOP + "total = 0\n"
        "for x in loader:\n"
        "    total += model(x).sum().item()\n"
        "print(total)\n"
    )
    result = migrate_source(source, "train.py")
    output = str(result.output)
    assert "accel.reduce(total)" not in output
    assert "accel.global_loss" not in output
    assert not [f for f in result.findings if f.code == "AM009"]
