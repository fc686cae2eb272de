"""Every error class the runtime defines (and so may raise at a script) is
exported from ``accel_migrate.runtime``, so that a script can catch it by the
name its traceback prints, and is documented in docs/runtime.md's "Errors"
section (what raises it, the fix). Before r34d ``UnreachedParametersError``,
``EmptyShareForwardError``, ``RepeatedGradientError`` and fifteen more were
importable only from the modules that define them."""

from __future__ import annotations

import ast
import builtins
import importlib
import pkgutil
import re
from pathlib import Path

import accel_migrate.runtime as accel

ROOT = Path(accel.__file__).parent
DOCS = Path(__file__).parents[2] / "docs" / "runtime.md"


def _defined_errors() -> dict[str, str]:
    """Every exception class defined in the runtime's modules, to its module
    (read from the source: a module that needs an optional extra is not imported)."""
    found: dict[str, str] = {}
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
                if any(b.endswith(("Error", "Exception")) for b in bases):
                    found[node.name] = str(path.relative_to(ROOT))
    return found


def test_every_error_class_is_exported() -> None:
    errors = _defined_errors()
    assert {"UnreachedParametersError", "EmptyShareForwardError"} <= set(errors)
    assert "RepeatedGradientError" in errors
    missing = sorted(name for name in errors if name not in accel.__all__)
    assert missing == [], f"not exported from accel_migrate.runtime: {missing}"
    for name, where in errors.items():
        module = "accel_migrate.runtime." + where.removesuffix(".py").replace("/", ".")
        defined = getattr(importlib.import_module(module), name)
        assert getattr(accel, name) is defined, name
        assert issubclass(defined, Exception)


def test_every_raised_runtime_class_is_one_of_them() -> None:
    # a `raise X(...)` of a class whose name says error, anywhere in the
    # runtime: either a builtin/torch one or one of the exported classes
    errors = set(_defined_errors())
    raised: set[str] = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                raised.add(ast.unparse(node.exc.func).rsplit(".", 1)[-1])
    builtin = {n for n in raised if isinstance(getattr(builtins, n, None), type)}
    assert raised - builtin - errors == set()
    # (and the walk finds the package's modules)
    assert len(list(pkgutil.walk_packages([str(ROOT)]))) > 10


def test_every_error_class_is_documented() -> None:
    text = DOCS.read_text()
    section = text[text.index("\n## Errors\n") :]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    for name in _defined_errors():
        row = re.search(rf"^\| `{name}` \|(.+)\|(.+)\|$", section, re.MULTILINE)
        assert row, f"{name}: no row in docs/runtime.md's Errors table"
