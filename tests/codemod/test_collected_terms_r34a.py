"""Collections over a sharded loader (issue 12, r34a): ``firsts += [out[0]]``
was gathered per batch (the runtime raised GatherOrderError: LOUD);
``np.append(preds, p)`` was not read as a row join (SILENT: the metric over
this process's share); a count divided into a declined collected term
(``sum(running) / count``, ``meter.sum / total``) was combined alone."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(6, 2)
loader = DataLoader(TensorDataset(torch.randn(24, 6), torch.randint(0, 2, (24,))), batch_size=8)
{before}
with torch.no_grad():
    for x, y in loader:
        out = model(x)
{lines}
{after}
"""


def _findings(before: str, lines: str, after: str) -> list[tuple[str, str, str]]:
    result = migrate_source(
        SCRIPT.format(before=before, lines=lines, after=after), "eval.py"
    )
    return [(f.code, f.status, f.message) for f in result.findings]


def test_an_integer_item_per_batch_is_not_gathered() -> None:
    for grow in ("firsts += [out[0].cpu()]", "firsts.append(out[0])"):
        found = _findings("firsts = []", "        " + grow, "print(len(firsts))")
        (am029,) = [f for f in found if f[0] == "AM029"]
        assert am029[1] == "needs-review", am029
        assert "integer item" in am029[2] and "first row" in am029[2]


def test_an_item_of_a_call_or_a_later_output_is_gathered() -> None:
    # a model returning (logits, feats): `feats.append(model(imgs)[1])` (the ReID
    # shape of reid_stdout_logger_project, MATCH before r34a) is one output of
    # several, gathered per batch as before (the runtime checks the rows)
    for grow in ("feats.append(model(x)[1])", "feats.append(out[1].cpu())"):
        found = _findings("feats = []", "        " + grow, "print(len(feats))")
        (am029,) = [f for f in found if f[0] == "AM029"]
        assert am029[1] == "fixed" and "per_batch=True" in am029[2], (grow, am029)


def test_a_whole_output_per_batch_is_still_gathered() -> None:
    found = _findings(
        "preds = []", "        preds.append(out.cpu())", "print(len(preds))"
    )
    (am029,) = [f for f in found if f[0] == "AM029"]
    assert am029[1] == "fixed" and "per_batch=True" in am029[2], am029


def test_np_append_is_a_row_join() -> None:
    for join in (
        "np.append(preds, p)",
        "np.append(preds, p, axis=0)",
        "np.append(preds, p, 0)",
    ):
        found = _findings(
            "preds = np.array([])",
            f"        p = out[:, 1].numpy()\n        preds = {join}",
            "print(preds.mean())",
        )
        am029 = [f for f in found if f[0] == "AM029"]
        assert am029 and am029[0][1] == "needs-review", (join, found)
        assert "`np.append` of itself" in am029[0][2]


def test_np_append_along_another_axis_is_not_a_row_join() -> None:
    found = _findings(
        "preds = np.zeros((8, 0))",
        "        preds = np.append(preds, out.numpy()[:8], axis=1)",
        "print(preds.mean())",
    )
    assert not [f for f in found if f[0] == "AM029" and "joins" in f[2]]


def test_a_count_divided_into_a_declined_collection_is_left_alone() -> None:
    found = _findings(
        "running = []\ncount = 0",
        "        err = (out.softmax(1)[:, 1] - y.float()).abs().max()\n"
        "        running.append(err.item() * x.size(0))\n        count += x.size(0)",
        'print("eval err %.6f" % (sum(running) / count))',
    )
    counts = [f for f in found if f[0] == "AM009" and "`count`" in f[2]]
    assert counts and counts[0][1] == "needs-review", found
    assert "whose `running` is not combined" in counts[0][2]


METER = """\
class Meter:
    def __init__(self):
        self.sum = 0.0

    def update(self, v, n):
        self.sum += v * n


meter = Meter()
total = 0"""


def test_a_count_divided_into_a_kept_meter_sum_is_left_alone() -> None:
    found = _findings(
        METER,
        "        err = (out.softmax(1)[:, 1] - y.float()).abs().max()\n"
        "        meter.update(err.item(), x.size(0))\n        total += x.size(0)",
        'print("eval err %.6f" % (meter.sum / total))',
    )
    totals = [f for f in found if f[0] == "AM009" and "`total`" in f[2]]
    assert totals and totals[0][1] == "needs-review", found
    assert "whose `meter` is not combined" in totals[0][2]
