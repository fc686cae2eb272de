"""Every ``ast`` parse of the package goes through ``python_ast`` (one lock per
process): CPython 3.11's AST constructor keeps its recursion depth in state that
threads share, and an unlocked ``ast.parse`` or ``ast.literal_eval`` of a string
in one thread made a locked parse in another fail with ``SystemError: AST
constructor recursion depth mismatch`` (CI28: the soundness corpus's thread pool,
797 errors)."""

from __future__ import annotations

import re
from pathlib import Path

import accel_migrate

PACKAGE = Path(accel_migrate.__file__).parent
_DIRECT = re.compile(r"(?<![\w.])ast\.(parse|literal_eval)\(")


def test_no_module_parses_outside_the_lock() -> None:
    direct = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "python_ast.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _DIRECT.search(line) and not line.lstrip().startswith("#")
    ]
    assert direct == [], "use accel_migrate.codemod.python_ast: " + ", ".join(direct)
