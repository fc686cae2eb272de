"""AM029: one value appended per row of the batch, in a loop over the rows of a
batch tensor inside the loop over a sharded loader (the BERT SQuAD example's
``for i, example_index in enumerate(example_indices):
all_results.append(RawResult(...))``), is one value per sample: gathered in
order after the loop (``accel.gather_in_order(all_results, eval_dataloader)``).
Before r36a it was needs-review ("filled in a loop inside the loop over
batches") and the migrated script crashed in ``write_predictions``
(``KeyError``: the other processes' features had no result)."""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import collections

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

Raw = collections.namedtuple("Raw", ["uid", "logits"])
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,))), batch_size=4)
for x, y in train:
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
feats = torch.randn(12, 4)
{data}
loader = DataLoader(data, batch_size=4)
results = []
with torch.no_grad():
    for inputs, indices in loader:
        if len(results) % 100 == 0:
            print("done", len(results))
        out = model(inputs)
{inner}
print(results)
"""
TENSORS = "data = TensorDataset(feats, torch.arange(12))"


def _migrate(inner: str, data: str = TENSORS) -> tuple[str, list[str]]:
    source = SCRIPT.format(data=data, inner=inner)
    result = migrate_source(source, "predict.py")
    return result.output, [f.message for f in result.needs_review if f.code == "AM029"]


@pytest.mark.parametrize(
    "inner",
    [
        "        for i, index in enumerate(indices):\n"
        "            results.append(Raw(uid=int(index.item()), logits=out[i].tolist()))",
        "        for i in range(len(indices)):\n"
        "            results.append(Raw(uid=int(indices[i]), logits=out[i].tolist()))",
        "        for i in range(inputs.size(0)):\n"
        "            results += [Raw(uid=int(indices[i]), logits=out[i].tolist())]",
    ],
)
def test_one_value_per_row_is_gathered_in_order(inner: str) -> None:
    output, review = _migrate(inner)
    assert "results = accel.gather_in_order(results, loader)\n" in output
    assert review == []


@pytest.mark.parametrize(
    "inner, data, why",
    [
        # several values a row: not one per sample
        (
            "        for i, index in enumerate(indices):\n"
            "            results.extend([Raw(uid=int(index), logits=out[i].tolist())])",
            TENSORS,
            "not gathered",
        ),
        # a row skipped by a test of the data
        (
            "        for i, index in enumerate(indices):\n"
            "            if out[i, 0] > 0:\n"
            "                results.append(Raw(uid=int(index), logits=out[i].tolist()))",
            TENSORS,
            "under a condition",
        ),
        # a loop over something other than the batch's rows
        (
            "        for i in range(3):\n"
            "            results.append(Raw(uid=i, logits=out[i].tolist()))",
            TENSORS,
            "filled in a loop inside the loop over batches",
        ),
        # a dataset of the file whose items hold a list: `indices` may be a
        # list of per-field tensors (the default collate), not the rows
        (
            "        for i, index in enumerate(indices):\n"
            "            results.append(Raw(uid=int(index), logits=out[i].tolist()))",
            "class Pairs(torch.utils.data.Dataset):\n"
            "    def __len__(self):\n        return 12\n\n"
            "    def __getitem__(self, i):\n        return feats[i], [i, i]\n\n\n"
            "data = Pairs()",
            "filled in a loop inside the loop over batches",
        ),
    ],
)
def test_a_loop_not_proven_to_walk_the_rows_is_reported(
    inner: str, data: str, why: str
) -> None:
    output, review = _migrate(inner, data)
    assert "gather_in_order" not in output
    assert any(why in message for message in review), review


@pytest.mark.parametrize(
    "inner",
    [
        "        base = len(results)\n"
        "        for i, index in enumerate(indices):\n"
        "            results.append(Raw(uid=base + i, logits=out[i].tolist()))",
        "        for i, index in enumerate(indices):\n"
        "            results.append(Raw(uid=len(results), logits=out[i].tolist()))",
    ],
)
def test_a_count_that_feeds_the_values_is_no_mere_count(inner: str) -> None:
    """``len(results)`` read in a test or a log line leaves the gathering as it
    was; read into the values collected (ids counted per process from 0) it would
    repeat them once gathered (rev18b: migrated with no finding)."""
    output, review = _migrate(inner)
    assert "gather_in_order" not in output
    assert any("used elsewhere in the loop" in message for message in review), review
