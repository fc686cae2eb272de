"""``for o in list(outs)`` where ``outs = model(x)`` is a model's list of its
heads' outputs: a loop over a fixed number of heads (a sum of means), not over
the batch's rows. Before r36a ``list(v)`` of any value of the batch was read as
its rows, so ``sum(losses)`` of two heads' mean losses was backpropagated with
``reduction="sum"``: each process's gradient summed across processes, twice the
original's at world size 2, with a "fixed" finding (``loop_walks``). It is
read as rows only where the file shows the value is a tensor."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.heads = nn.ModuleList([nn.Linear(8, 3) for _ in range(2)])

    def forward(self, x):
        h = self.body(x)
        return [head(h) for head in self.heads]


model = Heads()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4), torch.randint(0, 3, (32,))), batch_size=8)
for x, y in loader:
    opt.zero_grad()
    outs = model(x){check}
    losses = []
    for o in list(outs):
        losses.append(F.cross_entropy(o, y))
    loss = sum(losses)
    loss.backward()
    opt.step()
"""


def _migrate(check: str) -> tuple[str, list[str]]:
    result = migrate_source(SCRIPT.format(check=check), "heads.py")
    return result.output, [f.message for f in result.needs_review if f.code == "AM007"]


def test_a_list_of_a_model_output_is_not_read_as_its_rows() -> None:
    output, review = _migrate("")
    assert 'reduction="sum"' not in output
    assert "accel.backward(loss)" in output
    assert len(review) == 1
    assert "loop over `list(outs)`" in review[0]
    assert "a model returning its heads' outputs" in review[0]


def test_a_value_the_file_reads_as_a_tensor_walks_its_rows() -> None:
    # `outs.size(0)`: a tensor, whose list walks its rows, one mean per sample
    output, review = _migrate("\n    n = outs.size(0)")
    assert 'accel.backward(loss, reduction="sum")' in output
    assert review == []


def test_a_name_bound_again_is_not_proven_a_tensor_where_it_is_walked() -> None:
    """rev17: ``outs = torch.stack(outs)`` after the walk makes ``outs.size()``
    read a tensor, but the ``list(outs)`` before it walked the heads' list: the
    name's two bindings prove nothing (was ``reduction="sum"``, "fixed", the
    gradient doubled at world 2: 2.757 vs 5.514)."""
    script = SCRIPT.format(check="").replace(
        "    opt.step()\n",
        "    opt.step()\n    outs = torch.stack(outs)\n    n = outs.size(0)\n",
    )
    result = migrate_source(script, "heads.py")
    assert 'reduction="sum"' not in result.output
    assert [f.code for f in result.needs_review if f.code == "AM007"] == ["AM007"]
