"""Golden pairs: fixtures/<rule or scenario>/<case>.in.py -> .out.py + .findings.txt,
and the whole legacy scripts fixtures/realworld/<case>.py -> golden/<case>.out.py +
golden/<case>.findings.txt (the scripts stay runnable under their own names).

Every pair is also checked for: the output parses, a second run changes nothing,
and a case whose output equals its input comes back byte for byte.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from accel_migrate.codemod import migrate_source
from tests.conftest import FIXTURES

CASES = sorted(FIXTURES.glob("*/*.in.py"))
REALWORLD = sorted((FIXTURES / "realworld").glob("*.py"))


def _name(path: Path) -> str:
    stem = path.name.removesuffix(".py").removesuffix(".in")
    return f"{path.parent.name}/{stem}"


def _golden(case: Path, suffix: str) -> Path:
    if case.name.endswith(".in.py"):
        return case.with_name(case.name.replace(".in.py", suffix))
    return case.parent / "golden" / (case.name.removesuffix(".py") + suffix)


def _findings_text(result) -> str:
    lines = [
        f"{f.line}:{f.column}: {f.code} [{f.status}] {f.message}"
        for f in result.findings
    ]
    if result.skip_reason:
        lines.append(f"skipped: {result.skip_reason}")
    return "".join(line + "\n" for line in lines)


@pytest.mark.parametrize("case", CASES + REALWORLD, ids=_name)
def test_golden(case: Path, update_golden: bool) -> None:
    source = case.read_bytes()
    out_path = _golden(case, ".out.py")
    findings_path = _golden(case, ".findings.txt")
    result = migrate_source(source, _name(case))
    output = result.output
    assert isinstance(output, bytes)
    findings = _findings_text(result)
    if update_golden:
        out_path.parent.mkdir(exist_ok=True)
        out_path.write_bytes(output)
        findings_path.write_text(findings)
    assert (
        out_path.exists()
    ), f"{out_path.name} missing: run pytest --update-golden and read the diff"
    assert output == out_path.read_bytes()
    assert findings == findings_path.read_text()

    ast.parse(output)
    again = migrate_source(output, _name(case))
    assert again.output == output, "a second run must change nothing"
    if output == source:
        assert not result.changed


def test_there_are_enough_golden_pairs() -> None:
    assert len(CASES) >= 15
    unchanged = [
        c
        for c in CASES
        if c.read_bytes()
        == c.with_name(c.name.replace(".in.py", ".out.py")).read_bytes()
    ]
    assert unchanged, "some cases must show code that is left alone"
