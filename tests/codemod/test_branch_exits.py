"""``leaves_block``: a ``break``/``continue`` in the body of a loop inside the
arm stays in that loop; one in the loop's ``else``, a ``return``, a ``raise``
or an exit call leaves the block."""

from __future__ import annotations

import libcst as cst
import pytest

from accel_migrate.codemod.branch_exits import leaves_block


def _leaves(source: str) -> bool:
    statement = cst.parse_module(source).body[0]
    assert isinstance(statement, (cst.If, cst.Try))
    return leaves_block(statement)


@pytest.mark.parametrize(
    "source",
    [
        "try:\n    for e in x:\n        if e:\n            break\nexcept E:\n    pass\n",
        "if a:\n    while b:\n        continue\n",
        "if a:\n    def f():\n        return 1\n",
    ],
)
def test_exits_that_stay_inside(source: str) -> None:
    assert not _leaves(source)


@pytest.mark.parametrize(
    "source",
    [
        "if a:\n    break\n",
        "try:\n    for e in x:\n        pass\n    else:\n        break\nexcept E:\n    pass\n",
        "if a:\n    for q in z:\n        return 1\n",
        "if a:\n    while b:\n        sys.exit(1)\n",
        "try:\n    f()\nexcept E:\n    raise\n",
    ],
)
def test_exits_that_leave(source: str) -> None:
    assert _leaves(source)
