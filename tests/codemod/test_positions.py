"""``positions.compute``: libcst's positions, and the code of the same codegen,
which is ``Module.code``; the engine's rules read both from it."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from accel_migrate.codemod import positions
from tests.codemod.test_fastvisit import SYNTHETIC
from tests.conftest import FIXTURES

SOURCES = (
    sorted((FIXTURES / "realworld").glob("*.py"))[::2]
    + sorted((FIXTURES / "soundness").glob("*.py"))[::6]
)


def _check(module: cst.Module) -> None:
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    found, code = positions.compute(wrapper)
    assert code == module.code
    assert len(found) == len(expected) > 0
    assert all(found[node] == place for node, place in expected.items())
    # Stored as libcst's own: a later resolve computes nothing again.
    assert wrapper.resolve(PositionProvider) is found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_positions_and_code_as_libcst(path: Path) -> None:
    _check(cst.parse_module(path.read_bytes()))


def test_a_changed_tree_with_other_newlines() -> None:
    module = cst.parse_module(SYNTHETIC.replace("\n", "\r\n"))
    changed = module.with_changes(
        body=[*module.body, cst.parse_statement("accel.backward(loss)\n")]
    )
    _check(changed)
