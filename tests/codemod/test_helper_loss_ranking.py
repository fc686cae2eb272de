"""A loss function of a helper module that ranks its per-sample losses over the
batch and keeps some by rank (bhanML/Co-teaching's ``loss.loss_coteaching``:
``np.argsort(loss_1.data)``, then the ``int(remember_rate * len(...))``
smallest, exchanged between two networks). Over a sharded batch each process
ranks its own share: AM007 names it (round t8a: SILENT before, numpy's
``np.argsort(a)`` was read as ``a.argsort(dim)`` and helper modules' rankings
were not read at all)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from accel_migrate.codemod import MigrateOptions, migrate_source
from accel_migrate.codemod.project_view import ProjectView, read_project
from accel_migrate.codemod.reduction.pairwise import _ranks_batch

LOSS = """\
import numpy as np
import torch
import torch.nn.functional as F


def loss_coteaching(y_1, y_2, t, forget_rate):
    loss_1 = F.cross_entropy(y_1, t, reduction="none")
    ind_1_sorted = np.argsort(loss_1.data.cpu())
    loss_2 = F.cross_entropy(y_2, t, reduction="none")
    ind_2_sorted = np.argsort(loss_2.data.cpu())
    num_remember = int((1 - forget_rate) * len(ind_1_sorted))
    ind_1_update = ind_1_sorted[:num_remember]
    ind_2_update = ind_2_sorted[:num_remember]
    loss_1_update = F.cross_entropy(y_1[ind_2_update], t[ind_2_update])
    loss_2_update = F.cross_entropy(y_2[ind_1_update], t[ind_1_update])
    return loss_1_update, loss_2_update


def plain_loss(y, t):
    return F.cross_entropy(y, t)


def class_ranked_loss(y, t):
    top = y.topk(2, 1)[0]
    return F.cross_entropy(y, t) + top.mean()
"""

SCRIPT = """\
import torch
from torch.utils.data import DataLoader
from loss import {name}

m1 = torch.nn.Linear(4, 3)
m2 = torch.nn.Linear(4, 3)
opt1 = torch.optim.SGD(m1.parameters(), lr=0.1)
opt2 = torch.optim.SGD(m2.parameters(), lr=0.1)
for x, y in DataLoader(data, batch_size=8, shuffle=True):
    {call}
    opt1.zero_grad()
    loss_1.backward()
    opt1.step()
    opt2.zero_grad()
    loss_2.backward()
    opt2.step()
"""

CALLS = {
    "loss_coteaching": "loss_1, loss_2 = loss_coteaching(m1(x), m2(x), y, 0.2)",
    "plain_loss": "loss_1, loss_2 = plain_loss(m1(x), y), plain_loss(m2(x), y)",
    "class_ranked_loss": (
        "loss_1, loss_2 = class_ranked_loss(m1(x), y), class_ranked_loss(m2(x), y)"
    ),
}


def test_the_view_reads_a_ranking_of_the_batch(tmp_path: Path) -> None:
    (tmp_path / "loss.py").write_text(LOSS)
    probe = tmp_path / "probe.py"
    probe.write_text("import loss\n")
    table = dict(read_project(str(probe)).helpers)
    assert table["loss.loss_coteaching"].pairwise == "np.argsort(loss_1.data.cpu())"
    assert table["loss.plain_loss"].pairwise == ""
    assert table["loss.class_ranked_loss"].pairwise == ""  # classes, dim 1


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize(
    ("name", "ranked"),
    [("loss_coteaching", True), ("plain_loss", False), ("class_ranked_loss", False)],
)
def test_am007_names_the_ranking_in_the_helper(
    tmp_path: Path, name: str, ranked: bool, batch: bool
) -> None:
    (tmp_path / "loss.py").write_text(LOSS)
    script = tmp_path / "main.py"
    script.write_text(SCRIPT.format(name=name, call=CALLS[name]))
    options = MigrateOptions()
    if batch:
        view = ProjectView([str(script), str(tmp_path / "loss.py")])
        options = MigrateOptions(project=view.facts_for(str(script)))
    result = migrate_source(script.read_text(), str(script), options)
    findings = [f for f in result.findings if f.code == "AM007"]
    assert len(findings) == 2
    if name == "plain_loss":
        assert all(f.status == "fixed" for f in findings)
    for finding in findings:
        if ranked:
            assert finding.status == "needs-review"
            assert (
                "`np.argsort(loss_1.data.cpu())` in `loss_coteaching` in loss.py"
                in (finding.message)
            )
        else:
            assert "compares the samples" not in finding.message


@pytest.mark.parametrize(
    ("code", "names", "over_batch"),
    [
        ("np.argsort(losses)", {"numpy.argsort"}, True),
        ("np.argsort(losses, axis=0)", {"numpy.argsort"}, True),
        ("np.argsort(scores, axis=1)", {"numpy.argsort"}, False),
        ("np.argsort(scores, 1)", {"numpy.argsort"}, False),
        ("torch.topk(losses, 3)", {"torch.topk"}, True),
        ("torch.topk(out, 3, 1)", {"torch.topk"}, False),
        ("losses.argsort()", set(), True),
        ("out.argsort(1)", set(), False),
    ],
)
def test_numpy_rankings_take_the_array_first(
    code: str, names: set[str], over_batch: bool
) -> None:
    call = cst.parse_expression(code)
    assert isinstance(call, cst.Call)
    assert _ranks_batch(call, names) is over_batch
