"""``file_changes``: a folder ``tempfile.TemporaryDirectory()`` makes is one of
each process's own (``per_process``), found once per tree, by a cache that
keeps no tree alive (a long batch migrates thousands of files)."""

from __future__ import annotations

import gc
import weakref

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper

from accel_migrate.codemod import file_changes
from accel_migrate.codemod.analysis import ModuleIndex
from accel_migrate.codemod.subtrees import findall

SOURCE = """
import os
import tempfile

import torch

with tempfile.TemporaryDirectory() as tempdir:
    best = os.path.join(tempdir, "best.pt")
    torch.save({}, best)
shared = os.path.join(tempfile.gettempdir(), "best.pt")
torch.save({}, shared)
"""


def _saved_paths(index: ModuleIndex) -> list[cst.BaseExpression]:
    calls = findall(index.module, m.Call(func=m.Attribute(attr=m.Name("save"))))
    return [call.args[1].value for call in calls]  # type: ignore[attr-defined]


def test_a_temporary_directory_is_each_process_own() -> None:
    index = ModuleIndex(MetadataWrapper(cst.parse_module(SOURCE)), "accel")
    best, shared = _saved_paths(index)
    assert file_changes.per_process(index, best)
    assert not file_changes.per_process(index, shared)


def test_the_temporary_folders_keep_no_tree_alive() -> None:
    index = ModuleIndex(MetadataWrapper(cst.parse_module(SOURCE)), "accel")
    best, _ = _saved_paths(index)
    assert file_changes.per_process(index, best)
    alive = weakref.ref(index)
    del index, best
    gc.collect()
    assert alive() is None
