"""Shapes of the t14a trial (ej0cl6/deep-active-learning's MC-dropout query):
``probs[i][idxs] += F.softmax(out, dim=1)`` fills, per dropout pass ``i``, the
cells of the pool samples a batch holds. Over a sharded loader each process
fills only its share; the collection was not seen (its container
``probs[i]`` is a subscript, not a variable made before the loop) and the
query then ranked half-empty rows with no finding (SILENT). Now it is AM009's
collected value, like ``probs[idxs] += ...``."""

from __future__ import annotations

from accel_migrate.codemod import migrate_source

SCRIPT = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = TensorDataset(torch.randn(16, 4), torch.randint(0, 3, (16,)), torch.arange(16))
loader = DataLoader(data, batch_size=4, shuffle=True)
for x, y, idxs in loader:
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


def predict_prob_dropout_split(data, n_drop=3):
    model.train()
    probs = torch.zeros([n_drop, len(data), 3])
    loader = DataLoader(data, shuffle=False, batch_size=4)
    for i in range(n_drop):
        with torch.no_grad():
            for x, y, idxs in loader:
                out = model(x)
                probs[i][idxs] += F.softmax(out, dim=1)
    return probs


print(predict_prob_dropout_split(data).sum())
"""


def test_cells_of_a_row_collected_per_batch_are_named() -> None:
    result = migrate_source(SCRIPT.encode(), "query.py")
    (finding,) = [f for f in result.findings if f.code == "AM009" and f.line == 24]
    assert finding.status == "needs-review"
    assert finding.message.startswith(
        "values collected with `probs[...] += ...` hold this process's share"
    )


NETS = """\
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader


class Net:
    def __init__(self, net, params):
        self.net = net
        self.params = params

    def train(self, data):
        self.clf = self.net()
        optimizer = torch.optim.SGD(self.clf.parameters(), lr=0.1)
        loader = DataLoader(data, shuffle=True, batch_size=4)
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(self.clf(x), y)
            loss.backward()
            optimizer.step()
"""

UTILS = """\
import torch.nn as nn

from nets import Net


def get_net(name):
    if name == "MNIST":
        return Net(lambda: nn.Linear(4, 3), {"lr": 0.1})
    return Net(lambda: nn.Linear(8, 3), {"lr": 0.1})


def get_other(name):
    return name.upper()
"""

DEMO = """\
import torch

from utils import get_net, get_other

net = get_net("MNIST")
data = [(torch.randn(4), 0) for _ in range(8)]
net.train(data)
print(get_other("x"))
"""


def test_a_factory_returning_a_trainer_leaves_the_script_whole(tmp_path) -> None:
    (tmp_path / "nets.py").write_text(NETS)
    (tmp_path / "utils.py").write_text(UTILS)
    script = tmp_path / "demo.py"
    script.write_text(DEMO)
    result = migrate_source(script.read_bytes(), str(script))
    assert not result.changed and result.skip_reason is None
    (blocking,) = [f for f in result.findings if f.code == "AM004"]
    assert blocking.status == "needs-review" and blocking.line == 5
    assert blocking.message.startswith(
        '`get_net("MNIST")` builds `get_net` in utils.py, which trains models of '
        "its own there: it returns `Net(...)`, `Net` in nets.py, which trains: "
    )
    assert "in nets.py wrap each model" in blocking.message.replace("In ", "in ")
