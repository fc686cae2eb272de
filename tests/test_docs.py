"""The rule pages in docs/rules/ are generated from the rule docstrings and must
be current; every rule documents What / Why / Example / Fix safety."""

from __future__ import annotations

import re

import pytest

from accel_migrate.codemod.rule import registered_rules
from accel_migrate.docgen import DOCS, expected_pages

RULES = registered_rules()


def test_rule_docs_are_current() -> None:
    stale = [
        name
        for name, text in expected_pages().items()
        if not (DOCS / name).exists() or (DOCS / name).read_text() != text
    ]
    extra = sorted(p.name for p in DOCS.glob("*.md") if p.name not in expected_pages())
    assert not stale and not extra, f"run `make docs`: stale {stale}, extra {extra}"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_docstring_has_every_section(rule) -> None:
    doc = rule.doc()
    assert doc.startswith(
        f"{rule.code} {rule.name}:"
    ), "first line: '<code> <name>: summary'"
    for section in ("## What", "## Why", "## Example", "## Fix safety"):
        assert section in doc, f"{rule.code} lacks {section}"
    assert re.search(
        r"# before\n.*# after\n", doc, re.DOTALL
    ), "the example shows before and after"


def test_codes_are_unique_and_well_formed() -> None:
    codes = [rule.code for rule in RULES]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"AM\d{3}", code) for code in codes)
    names = [rule.name for rule in RULES]
    assert len(names) == len(set(names))


def test_rules_register_themselves_without_a_list() -> None:
    import pkgutil

    import accel_migrate.codemod.rules as package

    modules = [info.name for info in pkgutil.iter_modules(package.__path__)]
    assert len(modules) == len(RULES), "one rule per module, every module registered"
    assert {rule.__module__.rsplit(".", 1)[-1] for rule in RULES} == set(modules)
