"""``positions.compute``: libcst's positions, and the code of the same codegen,
which is ``Module.code``; the engine's rules read both from it."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from accel_migrate.codemod import positions
from accel_migrate.codemod.rule import Rule
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


# -- incremental: the statements of earlier trees replayed -----------------------------


def _compare_lazily(found: positions.Positions, module: cst.Module) -> int:
    """Every node's position in ``found`` against libcst's, each looked up as a
    rule looks it up (nothing remembered from one lookup to the next)."""
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    keep = positions._set
    positions._set = lambda *_: None  # type: ignore[assignment]
    try:
        for node, place in expected.items():
            assert found[node] == place, type(node).__name__
            assert found.get(node) == place
        assert found.get(cst.Name("elsewhere")) is None
        assert cst.Name("elsewhere") not in found
    finally:
        positions._set = keep  # type: ignore[assignment]
    return len(expected)


@pytest.mark.parametrize(
    "path",
    [
        FIXTURES / "realworld" / "batchify.py",
        FIXTURES / "realworld" / "gan.py",
        FIXTURES / "soundness" / "cifar_bn_resnet.py",
    ],
    ids=lambda p: p.name,
)
def test_every_tree_of_a_full_pass_as_libcst(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine asks positions of the parsed tree and of each changed one;
    each answer (code and every node's place) is libcst's on that tree."""
    from accel_migrate.codemod import migrate_source

    computed = positions.compute
    trees: list[int] = []

    def checked(
        wrapper: MetadataWrapper, chunks: positions.Chunks | None = None
    ) -> tuple[object, str]:
        found, code = computed(wrapper, chunks)
        assert code == wrapper.module.code
        assert isinstance(found, positions.Positions)
        trees.append(_compare_lazily(found, wrapper.module))
        return found, code

    monkeypatch.setattr(positions, "compute", checked)
    # Every tree a rule runs on is asked (the rules themselves ask few since
    # round 17: AM010 and AM012 place only the calls they found).
    run = Rule.run.__func__  # type: ignore[attr-defined]

    def asking(cls, wrapper, context):  # type: ignore[no-untyped-def]
        context.positions_of(wrapper)
        return run(cls, wrapper, context)

    monkeypatch.setattr(Rule, "run", classmethod(asking))
    result = migrate_source(path.read_bytes(), str(path))
    assert result.output != result.source
    # The parsed tree and at least two changed ones, which replayed statements.
    assert len(trees) >= 3


def test_statements_moved_reindented_and_nested_replays() -> None:
    """A statement replayed at another line; one moved under an ``if`` (another
    indentation: generated again); a tree whose replayed statement holds a
    statement that its own generation replayed; an ``elif``; no final newline."""
    source = (
        "import torch\n\n"
        "def train(model):\n"
        "    for x in data:\n"
        "        loss = model(x)\n"
        "        loss.backward()\n"
        "    if a:\n        pass\n    elif b:\n        save(model)\n"
        "    return model\n\n"
        "print(train(m))"
    )
    chunks = positions.Chunks()
    first = cst.parse_module(source)
    found, code = positions.compute(
        MetadataWrapper(first, unsafe_skip_copy=True), chunks
    )
    assert code == source
    _compare_lazily(found, first)
    # 1: a new statement on top moves everything down a line; the function's
    # body changes (a new first statement), its loop is replayed.
    function = first.body[1]
    assert isinstance(function, cst.FunctionDef)
    body = function.body
    second = first.with_changes(
        body=[
            cst.parse_statement("import accel_migrate.runtime as accel\n"),
            first.body[0],
            function.with_changes(
                body=body.with_changes(
                    body=[
                        cst.parse_statement("model = accel.prepare(model)\n"),
                        *body.body,
                    ]
                )
            ),
            *first.body[2:],
        ]
    )
    found, code = positions.compute(
        MetadataWrapper(second, unsafe_skip_copy=True), chunks
    )
    assert code == second.code
    assert found.log  # statements replayed (every top-level one but the new)
    _compare_lazily(found, second)
    # 2: a line less on top; the function replayed whole (from tree 2, holding
    # the loop replayed from tree 1); the last statement moved under an ``if``.
    last = second.body[-1]
    third = second.with_changes(
        body=[
            *second.body[1:-1],
            cst.If(test=cst.Name("ok"), body=cst.IndentedBlock(body=[last])),
        ]
    )
    found, code = positions.compute(
        MetadataWrapper(third, unsafe_skip_copy=True), chunks
    )
    assert code == third.code
    assert any(chunk.nested for chunk, _ in found.log)  # the loop, from tree 1
    _compare_lazily(found, third)
    # 3: the loop moved under an ``if`` in the function (one more indentation).
    function = third.body[1]
    assert isinstance(function, cst.FunctionDef)
    inner = function.body.body
    loop = inner[1]
    assert isinstance(loop, cst.For)
    guarded = cst.If(test=cst.Name("ok"), body=cst.IndentedBlock(body=[loop]))
    fourth = third.with_changes(
        body=[
            third.body[0],
            function.with_changes(
                body=function.body.with_changes(body=[inner[0], guarded, *inner[2:]])
            ),
            *third.body[2:],
        ]
    )
    found, code = positions.compute(
        MetadataWrapper(fourth, unsafe_skip_copy=True), chunks
    )
    assert code == fourth.code
    _compare_lazily(found, fourth)
