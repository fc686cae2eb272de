"""``ParentProvider`` answers what libcst's ``ParentNodeProvider`` answers."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from accel_migrate.codemod.parents import ParentProvider
from tests.conftest import FIXTURES, ROOT

SOURCES = [
    p
    for p in sorted(FIXTURES.rglob("*.py")) + sorted((ROOT / "examples").glob("*.py"))
    if p.read_bytes().strip()  # an empty module has no nodes to place
]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_same_parents_as_libcst(path: Path) -> None:
    wrapper = MetadataWrapper(
        cst.parse_module(path.read_bytes()), unsafe_skip_copy=True
    )
    expected = wrapper.resolve(ParentNodeProvider)
    found = wrapper.resolve(ParentProvider)
    assert len(found) == len(expected) > 0
    assert all(found[node] is parent for node, parent in expected.items())
