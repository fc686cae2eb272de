"""Rules that cannot apply skip their pass (``Rule.applies``).

A gate is decided from facts of the parsed tree (the calls it makes, the project
facts), and a rule may skip its pass only where the pass would change nothing
and report nothing. These tests migrate fixture and example files with the gates
and without them (``rule.GATES``) and compare everything the user gets: the
output bytes, the findings (lines and columns), the skip reason and the
suppressed statements.

The tests take a sample (every realworld script and every fifteenth other file);
``ACCEL_MIGRATE_ALL_GATES=1`` takes every file under ``fixtures/`` and
``examples/`` (1,204 files, several minutes).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accel_migrate.codemod import rule
from accel_migrate.codemod.engine import migrate_source
from accel_migrate.codemod.findings import MigrationError
from tests.conftest import FIXTURES, ROOT

_ALL = sorted(p for base in (FIXTURES, ROOT / "examples") for p in base.rglob("*.py"))
_REALWORLD = [p for p in _ALL if p.parent == FIXTURES / "realworld"]
SOURCES = (
    _ALL
    if os.environ.get("ACCEL_MIGRATE_ALL_GATES")
    else _REALWORLD + [p for p in _ALL if p not in _REALWORLD][::15]
)


def _migrate(path: Path, gates: bool) -> object:
    rule.GATES = gates
    try:
        result = migrate_source(path.read_bytes(), str(path))
    except MigrationError as exc:
        return ("error", str(exc))
    finally:
        rule.GATES = True
    return (
        result.output,
        result.findings,
        result.skip_reason,
        result.suppressed,
    )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_same_result_with_and_without_gates(path: Path) -> None:
    assert _migrate(path, gates=True) == _migrate(path, gates=False)


def test_gates_skip_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gates say no somewhere (else the test above compares nothing), and
    not where the rule changes or reports something."""
    said: dict[str, list[bool]] = {}

    def counted(cls: type[rule.Rule]) -> object:
        applies = cls.applies

        def gate(self: rule.Rule) -> bool:
            answer = applies(self)
            said.setdefault(self.code, []).append(answer)
            return answer

        return gate

    for cls in rule.registered_rules():
        monkeypatch.setattr(cls, "applies", counted(cls))
    for path in _REALWORLD:
        migrate_source(path.read_bytes(), str(path))
    skipped = {code: answers.count(False) for code, answers in said.items()}
    # Measured: AM003, AM012, AM013, AM014, AM036 skip all 14 realworld
    # scripts that reach the rules, AM041 12, AM024 13.
    assert skipped.get("AM003", 0) >= 10, skipped
    assert skipped.get("AM013", 0) >= 10, skipped
    assert skipped.get("AM036", 0) >= 10, skipped


def test_a_gated_rule_still_runs_where_it_applies() -> None:
    source = (
        "import torch\n"
        "import torch.nn as nn\n"
        "model = nn.Linear(2, 2)\n"
        "model = nn.DataParallel(model)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in torch.randn(4, 2):\n"
        "    loss = model(x).sum()\n"
        "    opt.zero_grad()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "torch.save(model.module.state_dict(), 'm.pt')\n"
    )
    result = migrate_source(source, "train.py")
    assert "DataParallel" not in result.output
    assert any(f.code == "AM003" for f in result.findings)
