"""``ModuleIndex.tagged`` by a worklist (``index_tagging.WORKLIST``): the same
variables as the rounds over every entry that it replaced.

Every ``tagged`` question a full pass asks (of every tree, every seed: loaders,
their containers, models, optimizers, rank-local values) is answered both ways
and compared, on a sample (every realworld script and every fifteenth other file
under ``fixtures/`` and ``examples/``; ``ACCEL_MIGRATE_ALL_TAGGING=1``: every
file); and the migration is compared with the rounds: output bytes, findings
(lines, columns, messages), skip reason and suppressed statements.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import index_tagging
from accel_migrate.codemod.analysis import ModuleIndex
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_TAGGING")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::15]
)


def _migrate(path: Path) -> object:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (result.output, result.findings, result.skip_reason, result.suppressed)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_tagged_set_of_a_pass_is_the_rounds(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = index_tagging.Tagging.tagged
    asked: list[int] = []

    def both(self: Any, *args: Any, **kwargs: Any) -> set[Any]:
        monkeypatch.setattr(index_tagging, "WORKLIST", False)
        rounds = original(self, *args, **kwargs)
        monkeypatch.setattr(index_tagging, "WORKLIST", True)
        worklist = original(self, *args, **kwargs)
        assert worklist == rounds
        asked.append(len(rounds))
        return worklist

    monkeypatch.setattr(index_tagging.Tagging, "tagged", both)
    with_worklist = _migrate(path)
    monkeypatch.setattr(index_tagging.Tagging, "tagged", original)
    monkeypatch.setattr(index_tagging, "WORKLIST", False)
    assert _migrate(path) == with_worklist
    if path.parent == FIXTURES / "realworld" and path.name != "already_distributed.py":
        assert any(asked)  # something was tagged


def test_a_chain_through_calls_and_returns_is_followed_to_its_end() -> None:
    # Each link is found only after the one before it: the last needs the
    # worklist to come back to entries it found false (the rounds: five rounds).
    source = """
import torch
from torch.utils.data import DataLoader
import accel_migrate.runtime as accel

def make():
    return accel.prepare_dataloader(DataLoader(ds))

def first(a):
    return second(a)

def second(b):
    return b

def train(c):
    for x in c:
        pass

def main():
    e = f = None
    train(d)
    d = first(e)
    e = f
    f = make()

main()
"""
    names = {
        key[1]
        for key in ModuleIndex(
            MetadataWrapper(cst.parse_module(source)), "accel"
        ).loaders
    }
    assert {"c", "d", "e", "f", "b", "a"} <= names
    index_tagging.WORKLIST = False
    try:
        again = ModuleIndex(MetadataWrapper(cst.parse_module(source)), "accel")
        assert {key[1] for key in again.loaders} == names
    finally:
        index_tagging.WORKLIST = True
