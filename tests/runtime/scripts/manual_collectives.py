"""How many buffer broadcasts and gradient all-reduces a model averaged by hand
(a second backward through one forward, the first reaching the trunk and one
head) costs, forward by forward, against torch's own DDP over the same model
trained with one backward per forward (which DDP can average), on the same
schedule: train steps, gradient accumulation under ``no_sync``, an evaluation
forward without grad, a train forward after it. Each rank writes its counts to
``FOLDER/rank{RANK}.json`` (``tests/runtime/test_manual_collectives.py``)."""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import accel_migrate.runtime as accel

calls = {"broadcast": 0, "all_reduce": 0}
_broadcast_coalesced = dist._broadcast_coalesced
_all_reduce = dist.all_reduce


def _counted_broadcast(*args, **kwargs):
    calls["broadcast"] += 1
    return _broadcast_coalesced(*args, **kwargs)


def _counted_all_reduce(*args, **kwargs):
    calls["all_reduce"] += 1
    return _all_reduce(*args, **kwargs)


# DDP and the runtime call both through the torch.distributed module
dist._broadcast_coalesced = _counted_broadcast
dist.all_reduce = _counted_all_reduce


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
        self.a = nn.Linear(8, 1)
        self.b = nn.Linear(8, 1)

    def forward(self, x):
        h = torch.tanh(self.trunk(x))
        return self.a(h), self.b(h)


def counted(log: list, what, *args):
    before = dict(calls)
    out = what(*args)
    log.append({key: calls[key] - before[key] for key in calls})
    return out


torch.manual_seed(0)
rank = int(os.environ.get("RANK", 0))
batches = [torch.randn(8, 4) + 3 * rank for _ in range(6)]

prepared = accel.prepare_model(Model())
opt = accel.prepare_optimizer(torch.optim.SGD(prepared.parameters(), lr=0.1))
plain_model = Model()
plain: list[DistributedDataParallel] = []  # built at its first forward, as accel's


def plain_forward(x):
    if not plain:
        plain.append(DistributedDataParallel(plain_model))
    return plain[0](x)


def two_backwards(a, b):
    accel.backward(a.pow(2).mean(), retain_graph=True)  # the trunk and head a
    accel.backward(b.pow(2).mean())


def one_backward(a, b):
    (a.pow(2).mean() + b.pow(2).mean()).backward()


logs: dict[str, dict[str, list]] = {}
for name, forward, backward, no_sync in (
    ("by_hand", prepared, two_backwards, lambda: accel.no_sync(prepared)),
    ("ddp", plain_forward, one_backward, lambda: plain[0].no_sync()),
):
    forwards: list = []
    backwards: list = []
    for x in batches[:3]:  # train steps
        a, b = counted(forwards, forward, x)
        counted(backwards, backward, a, b)
    for x in batches[3:5]:  # accumulated: no exchange
        with no_sync():
            a, b = counted(forwards, forward, x)
            counted(backwards, backward, a, b)
    a, b = counted(forwards, forward, batches[5])  # the step's last micro-batch
    counted(backwards, backward, a, b)
    module = prepared if name == "by_hand" else plain[0]
    module.eval()
    with torch.no_grad():
        counted(forwards, forward, batches[0])
    module.train()
    with torch.no_grad():
        counted(forwards, forward, batches[1])  # after a no-grad forward
    logs[name] = {"forwards": forwards, "backwards": backwards}
    dist.barrier()

Path(sys.argv[1], f"rank{rank}.json").write_text(json.dumps(logs))
