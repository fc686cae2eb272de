"""A loop that ranks its batch's samples against each other (NCF's hit rate
over one user's candidate list): read in the script (AM009 leaves the loop
alone; golden metric_sums/candidate_ranking) and in a helper of another module
the script hands a sharded loader (``HelperFact.ranks_batch``, AM006's
finding at the call)."""

from __future__ import annotations

import ast
from pathlib import Path

from accel_migrate.codemod import migrate_source
from accel_migrate.codemod.metrics.helper_ranking import helper_batch_ranking

EVALUATE = """\
import numpy as np
import torch


def metrics(model, test_loader, top_k):
    HR = []
    for user, item, label in test_loader:
        predictions = model(user, item)
        _, indices = torch.topk(predictions, top_k)
        recommends = torch.take(item, indices).cpu().numpy().tolist()
        HR.append(int(item[0].item() in recommends))
    return np.mean(HR)


def accuracy(model, loader):
    correct = 0
    for x, y in loader:
        _, pred = model(x).topk(1, 1)
        correct += pred.eq(y.view(-1, 1)).sum().item()
    return correct


def hardest(model, loader):
    for x, y in loader:
        order = model(x).sum(1).argsort(dim=0)
        return order
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

import evaluate

model = torch.nn.Embedding(10, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randint(0, 10, (32,)), torch.randint(0, 10, (32,)), torch.rand(32))
train_loader = DataLoader(data, batch_size=8, shuffle=True)
test_loader = DataLoader(data, batch_size=8)
for user, item, label in train_loader:
    optimizer.zero_grad()
    loss = (model(item).squeeze(1) - label).pow(2).mean()
    loss.backward()
    optimizer.step()
print(evaluate.metrics(lambda u, i: model(i).squeeze(1), test_loader, 3))
"""


def _functions() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(EVALUATE)
    return {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}


def test_a_helper_that_ranks_its_batch() -> None:
    functions = _functions()
    assert helper_batch_ranking(functions["metrics"]) == (
        "`torch.topk(predictions, top_k)`, line 9"
    )
    # a classifier's top-k over classes, and a ranking whose indices pick no
    # row of the batch without dim=0, are not rankings of the batch's samples
    assert helper_batch_ranking(functions["accuracy"]) == ""
    assert helper_batch_ranking(functions["hardest"]) == (
        "`model(x).sum(1).argsort(dim=0)`, line 25"
    )


def test_the_call_that_hands_it_a_sharded_loader_says_so(tmp_path: Path) -> None:
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    script = tmp_path / "main.py"
    script.write_text(MAIN)
    result = migrate_source(script.read_bytes(), str(script))
    (finding,) = [f for f in result.findings if f.code == "AM006" and f.line == 16]
    assert finding.status == "needs-review"
    assert (
        "`metrics` in evaluate.py, which ranks the samples of each batch against "
        "each other (`torch.topk(predictions, top_k)`, line 9)" in finding.message
    )
    assert "reduce them there with accel.reduce" not in finding.message
