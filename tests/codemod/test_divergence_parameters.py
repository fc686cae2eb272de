"""A parameter of a local function handed a rank (``train(..., args.local_rank)``)
is rank-local in the function; one handed the same value on every process, or
this process's batch, is not (``divergence_parameters``, issue 12, r30j)."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import divergence_memo
from accel_migrate.codemod.analysis import ModuleIndex

SCRIPT = """import argparse
import os

import torch


def train(model, loader, epochs, rank, every, batch):
    for epoch in range(epochs):
        if every > 1:
            print("every")
        if batch.sum() > 0:
            print("batch")
        if rank in (-1, 0):
            torch.save(model.state_dict(), "m.pt")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--local_rank", type=int, default={default})
    args = parser.parse_args()
    loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2)
    model = torch.nn.Linear(4, 1)
    for x in loader:
        train(model, loader, 2, {rank}, args.every, x)
"""


def _branches(source: str) -> dict[str, bool]:
    """Each print/save branch of ``train``: is it divergent?"""
    index = ModuleIndex(MetadataWrapper(cst.parse_module(source)), "accel")
    divergence = index.divergence
    train = next(f for f in index.functions if f.name.value == "train")
    loop = train.body.body[0]
    assert isinstance(loop, cst.For)
    found = {}
    for statement in loop.body.body:
        assert isinstance(statement, cst.If)
        code = cst.Module([]).code_for_node(statement.test)
        found[code] = statement.body in divergence.divergent
    return found


@pytest.mark.parametrize(
    "default, rank, local",
    [
        ('int(os.environ.get("LOCAL_RANK", -1))', "args.local_rank", True),
        ('int(os.environ.get("LOCAL_RANK", -1))', "rank=args.local_rank", True),
        ("-1", "args.local_rank", False),  # a plain default: the same everywhere
        ("-1", 'int(os.environ["RANK"])', True),
        ("-1", "0", False),
    ],
)
def test_handed_rank(default: str, rank: str, local: bool) -> None:
    source = SCRIPT.format(default=default, rank=rank)
    if rank.startswith("rank="):
        source = source.replace("args.every, x)", "every=args.every, batch=x)")
    found = _branches(source)
    assert found["rank in (-1, 0)"] is local
    # a value the same on every process stays so; a batch is no rank
    assert found["every > 1"] is False
    assert found["batch.sum() > 0"] is False


def test_reuse_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    source = SCRIPT.format(
        default='int(os.environ.get("LOCAL_RANK", -1))', rank="args.local_rank"
    )
    reused = _branches(source)
    monkeypatch.setattr(divergence_memo, "REUSE", False)
    assert _branches(source) == reused
