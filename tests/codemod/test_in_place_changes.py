"""fx38a: what fx37a left of issue 12.

- A container shrunk where only some processes go (``queue.pop()``, ``del
  d[k]``, ``s.discard(v)``...) has a length that differs between processes:
  before, only growing it made it rank-local, and ``while queue:``,
  ``range(len(queue))``, ``zip(loader, queue)`` or ``if len(queue) == 0:
  break`` around training steps were read as the same everywhere.
- A tensor written in place there (``flag.fill_(1.0)``, ``buf.zero_()``,
  ``torch.nn.init.ones_(flag)``) holds values that differ between processes,
  then drive a ``break``.
- A ``for`` over a draw of a fixed size (``random.sample(range(n), k)``,
  ``torch.randperm(n)[:k]``) makes as many turns on every process: AM011 read
  its body as a place "only some processes go".
"""

from __future__ import annotations

import pytest

from accel_migrate.codemod import migrate_source

QUEUE = """\
import collections

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
queue = {start}
for (x,) in loader:
    with torch.no_grad():
        wrong = (model(x).argmax(1) == 0).sum().item()
    if {test}:
        {shrink}
{use}
"""

_RANGE = """\
for _ in range(len(queue)):
    opt.zero_grad()
    model(torch.ones(2, 4)).pow(2).mean().backward()
    opt.step()
"""

_WHILE = """\
while queue:
    item = queue.pop()
    opt.zero_grad()
    model(torch.ones(2, 4)).pow(2).mean().backward()
    opt.step()
"""

_ZIP = """\
for (x,), w in zip(loader, queue):
    opt.zero_grad()
    (model(x).pow(2).mean() * 1.0).backward()
    opt.step()
"""

_BREAK = """\
for epoch in range(4):
    for (x,) in loader:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    if len(queue) == 0:
        break
"""

_SHRINKS = [
    ("[1.0] * 8", "queue.pop()"),
    ("[1.0] * 8", "item = queue.pop(0)"),
    ("[1.0] * 8", "queue.remove(1.0)"),
    ("[1.0] * 8", "queue.clear()"),
    ("[1.0] * 8", "del queue[0]"),
    ("[1.0] * 8", "del queue[:2]"),
    ("{i: 1.0 for i in range(8)}", "del queue[len(queue) - 1]"),
    ("{i: 1.0 for i in range(8)}", "queue.pop(len(queue) - 1)"),
    ("{i: 1.0 for i in range(8)}", "queue.popitem()"),
    ("set(range(8))", "queue.discard(len(queue) - 1)"),
    ("collections.deque(range(8))", "queue.popleft()"),
]


def _codes(source: str, code: str) -> list[str]:
    result = migrate_source(source, "train.py")
    return [f.message for f in result.needs_review if f.code == code]


@pytest.mark.parametrize("use", [_RANGE, _WHILE, _ZIP, _BREAK])
@pytest.mark.parametrize(("start", "shrink"), _SHRINKS)
def test_a_container_shrunk_where_ranks_differ_has_a_rank_local_length(
    start: str, shrink: str, use: str
) -> None:
    source = QUEUE.format(start=start, test="wrong > 2", shrink=shrink, use=use)
    assert _codes(source, "AM028"), source


@pytest.mark.parametrize("use", [_RANGE, _BREAK])
def test_a_container_shrunk_by_a_rank_local_key(use: str) -> None:
    # the same test everywhere, but the key differs: a set loses an item or not
    source = QUEUE.format(
        start="set(range(8))", test="True", shrink="queue.discard(wrong)", use=use
    )
    assert _codes(source, "AM028"), source


@pytest.mark.parametrize("use", [_RANGE, _BREAK])
@pytest.mark.parametrize(("start", "shrink"), _SHRINKS)
def test_a_container_shrunk_under_a_shared_test_stays_shared(
    start: str, shrink: str, use: str
) -> None:
    source = QUEUE.format(start=start, test="len(queue) > 4", shrink=shrink, use=use)
    assert not _codes(source, "AM028"), source


FLAG = """\
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
flag = torch.zeros(1)
for epoch in range(4):
    for (x,) in loader:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
        with torch.no_grad():
            wrong = (model(x).argmax(1) == 0).sum().item()
        if {test}:
            {write}
    if {stop}:
        break
"""

_WRITES = [
    ("flag.fill_(1.0)", "flag.item() > 0"),
    ("flag.zero_()", "flag.item() == 0"),
    ("flag.copy_(torch.ones(1))", "flag.sum() > 0"),
    ("flag.add_(1)", "flag.item() > 2"),
    ("flag.clamp_(max=-1.0)", "flag.item() < 0"),
    ("nn.init.ones_(flag)", "flag.item() > 0"),
    ("torch.nn.init.constant_(flag, 2.0)", "flag.item() > 0"),
]


@pytest.mark.parametrize(("write", "stop"), _WRITES)
def test_a_tensor_written_in_place_where_ranks_differ_is_rank_local(
    write: str, stop: str
) -> None:
    source = FLAG.format(test="wrong > 2", write=write, stop=stop)
    assert _codes(source, "AM028"), source


@pytest.mark.parametrize(("write", "stop"), _WRITES)
def test_a_tensor_written_in_place_under_a_shared_test_stays_shared(
    write: str, stop: str
) -> None:
    source = FLAG.format(test="epoch == 2", write=write, stop=stop)
    assert not _codes(source, "AM028"), source


def test_a_module_function_changes_no_variable() -> None:
    """``os.remove`` under a rank-local test does not make ``os`` (and every
    ``os.path.exists`` after it) rank-local."""
    source = FLAG.format(
        test="wrong > 2", write="os.remove('hard.txt')", stop="os.path.exists('stop')"
    )
    assert not _codes(source, "AM028"), source


SAVES = """\
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8)
for epoch in range(3):
    for (x,) in loader:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
{before}
    for i in {iterable}:
        torch.save(model.state_dict(), f"snapshot_{{i}}.pt")
"""


@pytest.mark.parametrize(
    ("before", "iterable"),
    [
        ("", "random.sample(range(10), 3)"),
        ("", "sorted(random.sample(range(10), 3))"),
        ("", "torch.randperm(10)[:3]"),
        ("", "torch.randperm(10)[:3].tolist()"),
        ("", "enumerate(torch.randint(0, 10, (3,)))"),
        ("    picks = torch.randperm(10)[:3]", "picks"),
    ],
)
def test_a_loop_over_a_draw_of_a_fixed_size_is_no_branch(
    before: str, iterable: str
) -> None:
    source = SAVES.format(before=before, iterable=iterable)
    result = migrate_source(source, "train.py")
    assert "accel.state_dict(model)" in str(result.output)
    assert not [f for f in result.needs_review if f.code in {"AM011", "AM028"}]


@pytest.mark.parametrize(
    ("before", "iterable"),
    [
        # a population whose length differs: too short raises on some only
        (
            "    hard = [i for i in range(8) if loss.item() > i]",
            "random.sample(hard, 2)",
        ),
        # shrunk where only some processes go
        (
            "    picks = random.sample(range(10), 3)\n"
            "    if loss.item() > 1:\n"
            "        picks.pop()",
            "picks",
        ),
        # its size differs between processes
        ("", "random.sample(range(10), random.randint(1, 3))"),
        ("", "torch.randperm(int(loss.item()) + 2)"),
        ("", "torch.randperm(10)[: int(loss.item())]"),
        # bound twice: which binding reaches the loop differs
        (
            "    picks = torch.randperm(10)[:3]\n"
            "    if loss.item() > 1:\n"
            "        picks = picks[:1]",
            "picks",
        ),
    ],
)
def test_a_loop_over_a_draw_whose_count_may_differ_is_reported(
    before: str, iterable: str
) -> None:
    source = SAVES.format(before=before, iterable=iterable)
    result = migrate_source(source, "train.py")
    assert [f for f in result.needs_review if f.code in {"AM011", "AM028"}], source


def test_a_module_function_with_a_trailing_underscore_changes_no_module() -> None:
    """``torch.nn.utils.clip_grad_norm_`` under a rank-local test does not
    make ``torch.nn.utils`` (and the norm of every later clip) rank-local, nor
    ``accel`` once AM rules have made it ``accel.clip_grad_norm_`` (the
    runtime's import is added after the rules: no import binds it yet)."""
    source = FLAG.format(
        test="wrong > 2",
        write="torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
        stop="torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) > 1e9",
    )
    assert not _codes(source, "AM028"), source


TRAINER = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model, opt, interval):
        self.model = model
        self.opt = opt
        self.interval = interval

    def update(self, x):
        return self.model(x).pow(2).mean()

    def pop(self, x):
        return self.model(x).sum()

    def train(self, loader):
        for epoch in range(3):
            for (x,) in loader:
                self.opt.zero_grad()
                loss = self.{call}(x)
                loss.backward()
                self.opt.step()
            if (epoch + 1) % self.interval == 0:
                torch.save(self.model.state_dict(), "ck.pt")


model = nn.Linear(4, 2)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), 1)
trainer.train(DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=8))
"""


@pytest.mark.parametrize("call", ["update", "pop"])
def test_a_method_of_the_scripts_class_changes_no_object(call: str) -> None:
    """``loss = self.update(x)`` (PyTorch-BYOL's trainer) is no dict's update
    and ``self.pop(x)`` no list's pop: ``self`` (and ``self.interval``, the
    checkpoint test's) stays the same on every process. The first draft of
    fx38a read growers inside assignments and left BYOL's batch whole."""
    source = TRAINER.format(call=call)
    result = migrate_source(source, "train.py")
    assert "accel.prepare_model(" in str(result.output)
    assert not [f for f in result.needs_review if f.code == "AM028"]
