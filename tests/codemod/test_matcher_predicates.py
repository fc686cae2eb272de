"""Matchers read once into predicates for ``subtrees.findall``
(``matcher_predicates``; round 27 of issue 14 in docs/performance.md).

A predicate must answer what libcst's ``_matches`` (no metadata) answers, for
every node: checked on every node of a module for matchers of each form the
module reads (and some it must leave to libcst), and, over a sample of the
fixtures (every realworld script and every sixtieth other file under
``fixtures/`` and ``examples/``; ``ACCEL_MIGRATE_ALL_PREDICATES=1``: every
file), on every candidate a pass's ``findall`` checks with a predicate. The
migration of the sample (output bytes, findings with lines and columns, skip
reason, suppressed statements) must be the same with ``COMPILED`` off.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import libcst as cst
import libcst.matchers as m
import pytest
from libcst.matchers._matcher_base import _construct_metadata_fetcher_null, _matches
from libcst.metadata import ParentNodeProvider

from accel_migrate.codemod import matcher_predicates, subtrees
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from accel_migrate.codemod.matcher_predicates import predicate
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_PREDICATES")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::60]
)
_NULL = _construct_metadata_fetcher_null()

_CODE = '''\
"""doc"""
import torch.nn.functional as F
from torch import *
from torch import nn

def train(model, loader, *args, lr=0.1, **kw):
    for x, y in loader:
        loss = F.mse_loss(model(x), y, reduction="sum")
        loss.backward()
        total = float(loss) + loss.item() + len(x) + f(x, y) + g()
        print(f"{total:.3f} {lr!r}", flush=True)
        model.module.step(**kw)
        h(reduction="mean")
    return lambda q=None: q
'''


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            found.append(node)
            return True

    module.visit(_All())
    return found


_READ = [
    m.Name(),
    m.Name("loss"),
    m.Name(value="x") | m.Name("y"),
    m.Attribute(attr=m.Name("item")),
    m.Attribute(value=m.Name() | m.Attribute(), attr=m.Name("step")),
    m.Call(func=m.Attribute(attr=m.Name("item")), args=[]),
    m.Call(func=m.Name("float"), args=[m.Arg(keyword=None)]),
    m.Call(func=m.Name("f"), args=(m.Arg(), m.Arg(value=m.Name("y")))),
    m.Call(func=m.Name("f"), args=[m.Arg()]),  # too short: no match
    m.Call(args=[m.Arg(keyword=m.Name("reduction"))]),
    m.Arg(keyword=None),
    m.Arg(keyword=m.Name("flush"), value=m.Name("True")),
    m.Arg(star="**"),
    m.Param(default=None),
    m.Param(star="*"),
    m.Name(value=m.MatchIfTrue(lambda v: v.startswith("l"))),
    m.Call(func=m.MatchIfTrue(lambda f: isinstance(f, cst.Attribute))),
    m.Module(has_trailing_newline=True),
    m.Module(has_trailing_newline=False),
    m.SimpleString('"sum"'),
    m.ImportFrom(names=m.ImportStar()),
    m.ImportFrom(names=[m.ImportAlias()]),
    m.Lambda(params=m.Parameters(params=[m.Param(default=m.Name("None"))])),
    m.FormattedStringExpression(conversion="r"),
    m.FormattedStringExpression(format_spec=None),
    m.Comparison() | m.BinaryOperation(operator=m.Add()),
]
_LEFT_TO_LIBCST = [
    m.Call(args=[m.ZeroOrMore(), m.Arg(keyword=m.Name("reduction"))]),
    m.Call(args=[m.DoNotCare(), m.Arg()]),
    m.Name(metadata=m.MatchMetadata(ParentNodeProvider, None)),
    ~m.Name("x"),
    m.Attribute(attr=~m.Name("item")),
    m.SaveMatchedNode(m.Name(), "name"),
    m.Call(func=m.SaveMatchedNode(m.Name(), "f")),
    m.AllOf(m.Name(), m.Name("x")),
    m.TypeOf(m.Name, m.Attribute),
    m.Call(args=m.OneOf([m.Arg()], [])),
    m.Name(value=0),  # type: ignore[arg-type]
]


def _id(matcher: Any) -> str:
    """The matcher's repr without the addresses of its functions: pytest-xdist
    needs the same test ids in every worker."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(matcher))


@pytest.mark.parametrize("matcher", _READ, ids=lambda m: _id(m))
def test_a_predicate_answers_as_libcst(matcher: Any) -> None:
    module = cst.parse_module(_CODE)
    check = predicate(matcher)
    assert check is not None
    answers = [check(n) for n in _nodes(module)]
    assert answers == [_matches(n, matcher, _NULL) is not None for n in _nodes(module)]


def test_the_matchers_match_somewhere_and_miss_somewhere() -> None:
    """The cases above are not vacuous: most matchers match some node, and
    each misses some."""
    nodes = _nodes(cst.parse_module(_CODE))
    matched = 0
    for matcher in _READ:
        check = predicate(matcher)
        assert check is not None
        answers = [check(n) for n in nodes]
        assert not all(answers), matcher
        matched += any(answers)
    assert matched >= len(_READ) - 2  # `f(x)` with one argument, no `False` module


@pytest.mark.parametrize("matcher", _LEFT_TO_LIBCST, ids=lambda m: _id(m))
def test_other_matchers_are_left_to_libcst(matcher: Any) -> None:
    assert predicate(matcher) is None


def test_findall_with_a_predicate_and_with_libcst(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = cst.parse_module(_CODE)
    subtrees.register(module)
    try:
        for matcher in _READ + _LEFT_TO_LIBCST:
            if isinstance(getattr(matcher, "metadata", None), m.MatchMetadata):
                continue  # no fetcher: libcst's LookupError either way
            with_predicates = [id(n) for n in subtrees.findall(module, matcher)]
            monkeypatch.setattr(matcher_predicates, "COMPILED", False)
            assert [id(n) for n in subtrees.findall(module, matcher)] == (
                with_predicates
            ), matcher
            monkeypatch.setattr(matcher_predicates, "COMPILED", True)
    finally:
        subtrees.clear()


def test_a_predicate_is_kept_per_matcher_object() -> None:
    matcher = m.Name("loss")
    assert predicate(matcher) is predicate(matcher)
    assert predicate(m.Name("loss")) is not predicate(matcher)


# -- a pass's checks -------------------------------------------------------------------

_COUNTS = {"checks": 0, "matches": 0}
_ORIGINAL = matcher_predicates.predicate


def _checked_predicate(matcher: Any) -> Any:
    check = _ORIGINAL(matcher)
    if check is None:
        return None

    def compared(node: cst.CSTNode) -> bool:
        answer = check(node)
        assert answer == (_matches(node, matcher, _NULL) is not None), (
            matcher,
            node,
        )
        _COUNTS["checks"] += 1
        _COUNTS["matches"] += answer
        return answer

    return compared


def _outcome(path: Path) -> tuple[Any, ...]:
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    return (
        result.output,
        tuple((f.line, f.column, f.code, f.status, f.message) for f in result.findings),
        result.skip_reason,
        result.suppressed,
    )


def test_the_sample_has_training_scripts() -> None:
    assert len(_REALWORLD) >= 10
    assert len(SOURCES) > len(_REALWORLD)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_pass_gets_libcsts_answers(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matcher_predicates, "predicate", _checked_predicate)
    compiled = _outcome(path)
    monkeypatch.setattr(matcher_predicates, "COMPILED", False)
    assert _outcome(path) == compiled


def test_the_training_scripts_ask_predicates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the realworld scripts the predicates are asked, and answer both ways."""
    monkeypatch.setattr(matcher_predicates, "predicate", _checked_predicate)
    _COUNTS.update(checks=0, matches=0)
    for path in _REALWORLD[:4]:
        _outcome(path)
    assert _COUNTS["checks"] > 1000, _COUNTS
    assert 0 < _COUNTS["matches"] < _COUNTS["checks"], _COUNTS
