"""The divergence analysis reuses statement walks across a file's trees
(``codemod/divergence_memo.py``); its results must be those of a fresh walk.

Every analysis a full pass builds (the shared one of each tree, AM008's with the
loss reads it makes global) is compared with an analysis of the same tree that
walks every statement (``divergence_memo.REUSE = False``, its own memo): the
divergent blocks, the rank-local increments, mutations, stores, calls, reads and
printed values, the tainted returns, globals, attributes and parameters. The
migration's
output, findings, skip reason and suppressed statements are compared too.

The tests take a sample (every realworld script and every fifteenth other file);
``ACCEL_MIGRATE_ALL_REUSE=1`` takes every file under ``fixtures/`` and
``examples/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from accel_migrate.codemod import divergence_memo
from accel_migrate.codemod.divergence import Divergence
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_REUSE")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::15]
)

_RESULTS = (
    "divergent",
    "local_increments",
    "local_mutations",
    "local_stores",
    "local_calls",
    "local_reads",
    "local_values",
    "tainted_returns",
    "tainted_globals",
    "tainted_attributes",
    "tainted_parameters",
)


def _results(divergence: Divergence) -> dict[str, Any]:
    return {name: getattr(divergence, name) for name in _RESULTS}


def _fresh(divergence: Divergence) -> Divergence:
    """The same analysis, every statement walked."""
    index = divergence.index
    shared = index.divergence_memo
    index.divergence_memo = None
    divergence_memo.REUSE = False
    try:
        return Divergence(index, divergence.uniform_calls)
    finally:
        divergence_memo.REUSE = True
        index.divergence_memo = shared


def _migrate(path: Path) -> object:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (result.output, result.findings, result.skip_reason, result.suppressed)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_reused_walks_give_a_fresh_walks_results(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[Divergence] = []
    init = Divergence.__init__

    def checked(self: Divergence, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if divergence_memo.REUSE:
            assert _results(self) == _results(_fresh(self)), path
            compared.append(self)

    monkeypatch.setattr(Divergence, "__init__", checked)
    with_reuse = _migrate(path)
    monkeypatch.setattr(Divergence, "__init__", init)
    monkeypatch.setattr(divergence_memo, "REUSE", False)
    assert with_reuse == _migrate(path)


def test_walks_are_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Statements are replayed (else the test above compares nothing): on later
    trees of a pass and in the fixpoint's later rounds."""
    memos: list[divergence_memo.DivergenceMemo] = []
    init = divergence_memo.DivergenceMemo.__init__

    def kept(self: divergence_memo.DivergenceMemo) -> None:
        init(self)
        memos.append(self)

    monkeypatch.setattr(divergence_memo.DivergenceMemo, "__init__", kept)
    for path in _REALWORLD:
        migrate_source(path.read_bytes(), str(path))
    reused = sum(memo.reused for memo in memos)
    walked = sum(len(traces) for memo in memos for traces in memo.traces.values())
    # Measured: most statement walks of a pass are replays.
    assert reused > walked, (reused, walked)


def test_a_changed_answer_walks_again() -> None:
    """A statement whose recorded question gets another answer on a later tree
    (the callee now returns a rank-local value) is walked again, not replayed."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    from accel_migrate.codemod.analysis import ModuleIndex

    source = (
        "import time\n"
        "def f(x):\n"
        "    return 1\n"
        "def g(x):\n"
        "    n = f(x)\n"
        "    if n > 0:\n"
        "        print(n)\n"
    )
    module = cst.parse_module(source)
    memo = divergence_memo.DivergenceMemo()
    index = ModuleIndex(MetadataWrapper(module, unsafe_skip_copy=True), "accel")
    index.divergence_memo = memo
    first = Divergence(index)
    assert not first.divergent
    # f now returns a rank-local value; g's statements are the same objects.
    f = module.body[1]
    assert isinstance(f, cst.FunctionDef)
    changed = module.with_changes(
        body=[
            module.body[0],
            f.with_changes(
                body=cst.parse_statement(
                    "def f(x):\n    return time.time()\n"
                ).body  # type: ignore[attr-defined]
            ),
            module.body[2],
        ]
    )
    index2 = ModuleIndex(MetadataWrapper(changed, unsafe_skip_copy=True), "accel")
    index2.divergence_memo = memo
    second = Divergence(index2)
    g = changed.body[2]
    assert isinstance(g, cst.FunctionDef)
    branch = g.body.body[1]
    assert isinstance(branch, cst.If)
    assert branch.body in second.divergent
    assert _results(second) == _results(_fresh(second))


def _index(module: Any, memo: divergence_memo.DivergenceMemo) -> Any:
    from libcst.metadata import MetadataWrapper

    from accel_migrate.codemod.analysis import ModuleIndex

    index = ModuleIndex(MetadataWrapper(module, unsafe_skip_copy=True), "accel")
    index.divergence_memo = memo
    return index


def test_a_changed_loop_replays_its_unchanged_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A top-level statement a rule changed (one line of a training loop) is
    walked again, but its unchanged inner statements are replayed
    (``NESTED``), with a fresh walk's results; without ``NESTED`` none is."""
    import libcst as cst

    source = (
        "import random\n"
        "def train(loader, model, opt):\n"
        "    total = 0\n"
        "    for epoch in range(3):\n"
        "        for x in loader:\n"
        "            loss = model(x)\n"
        "            loss.backward()\n"
        "            total += loss.item()\n"
        "            if total > 1:\n"
        "                print(total)\n"
        "        n = random.random()\n"
        "        if n > 0.5:\n"
        "            opt.step()\n"
        "    return total\n"
    )
    module = cst.parse_module(source)
    train = module.body[1]
    assert isinstance(train, cst.FunctionDef)
    epochs = train.body.body[1]
    assert isinstance(epochs, cst.For)
    inner = epochs.body.body[0]
    assert isinstance(inner, cst.For)
    new_line = cst.parse_statement("loss = model(x).mean()\n")
    changed_inner = inner.with_changes(
        body=inner.body.with_changes(body=(new_line, *inner.body.body[1:]))
    )
    changed_epochs = epochs.with_changes(
        body=epochs.body.with_changes(body=(changed_inner, *epochs.body.body[1:]))
    )
    changed = module.with_changes(
        body=[
            module.body[0],
            train.with_changes(
                body=train.body.with_changes(
                    body=(train.body.body[0], changed_epochs, train.body.body[2])
                )
            ),
        ]
    )
    reused = {}
    for nested in (False, True):
        monkeypatch.setattr(divergence_memo, "NESTED", nested)
        memo = divergence_memo.DivergenceMemo()
        Divergence(_index(module, memo))
        before = memo.reused
        second = Divergence(_index(changed, memo))
        reused[nested] = memo.reused - before
        assert _results(second) == _results(_fresh(second))
        # the draw's branch is divergent either way
        branch = changed_epochs.body.body[2]
        assert isinstance(branch, cst.If)
        assert branch.body in second.divergent
    # the inner loop's unchanged lines, and the draw and its branch
    assert reused[True] >= reused[False] + 4, reused


def test_a_loops_second_walk_is_keyed_by_its_divergent_blocks() -> None:
    """A loop's body is walked twice; on the second walk a branch in it may
    already be divergent from the first (``r`` is rank-local before the loop,
    not after its first step). The nested statements' key holds those blocks
    (``divergence_memo.inside``): the results are a fresh walk's, on the first
    tree and on a changed one."""
    import libcst as cst

    source = (
        "import os\n"
        "def f(items):\n"
        "    r = int(os.environ['RANK'])\n"
        "    total = 0\n"
        "    for item in items:\n"
        "        if r:\n"
        "            total += 1\n"
        "        r = 0\n"
        "        count = 1\n"
        "        count += item\n"
        "    return total\n"
    )
    module = cst.parse_module(source)
    memo = divergence_memo.DivergenceMemo()
    first = Divergence(_index(module, memo))
    assert _results(first) == _results(_fresh(first))
    loop = module.body[1].body.body[2]  # type: ignore[attr-defined]
    branch = loop.body.body[0]
    assert branch.body in first.divergent
    assert divergence_memo.inside(loop, first.divergent) >= {branch.body}
    changed = module.with_changes(
        body=[module.body[0], module.body[1], cst.parse_statement("x = 1\n")]
    )
    second = Divergence(_index(changed, memo))
    assert _results(second) == _results(_fresh(second))
