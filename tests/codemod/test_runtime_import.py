"""The runtime import is placed as libcst's AddImportsVisitor places it over the
whole module, though the engine hands it only the head of the module (with a
one-line stand-in for a class or function after the imports), and libcst's
matcher visitors look for decorated hooks once per class (matcher_hooks)."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
import pytest
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from accel_migrate.codemod import engine, matcher_hooks
from accel_migrate.codemod.options import RUNTIME_MODULE
from tests.conftest import FIXTURES

SOURCES = sorted(
    p
    for p in FIXTURES.rglob("*.py")
    if not p.name.endswith(".out.py") and "soundness" not in p.parts
)

HEADS = {
    "class_after_imports": "import torch\nclass Net(torch.nn.Module):\n    pass\n",
    "decorated_function": '"""doc"""\nimport os\n\n\n@decorator\ndef f():\n    return 1\n',
    "comment_above_def": "import os\n# a comment\ndef f():\n    pass\n",
    "no_imports_class_first": "class A:\n    x = 1\n",
    "only_imports": "import os\nimport sys\n",
    "strict_flag": "__strict__ = True\nimport os\nif os.name:\n    pass\n",
    "statement_first": "x = 1\nimport os\nwhile x:\n    x -= 1\n",
    "empty": "",
}


def _whole_module(module: cst.Module, alias: str) -> str:
    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, RUNTIME_MODULE, asname=alias)
    return AddImportsVisitor(context).transform_module(module).code


@pytest.mark.parametrize("name", sorted(HEADS))
def test_the_head_alone_gives_the_whole_modules_result(name: str) -> None:
    module = cst.parse_module(HEADS[name])
    assert engine._add_runtime_import(module, "accel").code == _whole_module(
        module, "accel"
    )


def test_every_fixture_gets_the_import_the_whole_module_would() -> None:
    assert len(SOURCES) > 100
    differ = []
    for path in SOURCES:
        module = cst.parse_module(path.read_bytes())
        if engine._add_runtime_import(module, "accel").code != _whole_module(
            module, "accel"
        ):
            differ.append(str(path.relative_to(FIXTURES)))
    assert differ == []


def test_matcher_hooks_still_run_in_a_class_that_has_them() -> None:
    class Plain(m.MatcherDecoratableVisitor):
        pass

    class Names(m.MatcherDecoratableVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        @m.visit(m.Name())
        def _name(self, node: cst.Name) -> None:
            self.seen.append(node.value)

        @m.call_if_inside(m.Call())
        def visit_Arg(self, node: cst.Arg) -> None:
            self.seen.append("arg")

    module = cst.parse_module("f(a)\nb\n")
    for _ in range(2):  # the second instances are answered from the class
        module.visit(Plain())
        names = Names()
        module.visit(names)
        assert names.seen == ["f", "arg", "a", "b"]


def test_install_and_uninstall_restore_libcsts_functions() -> None:
    from libcst.matchers import _visitors

    matcher_hooks.uninstall()
    try:
        assert (
            _visitors._gather_matchers is matcher_hooks._ORIGINALS["_gather_matchers"]
        )
    finally:
        matcher_hooks.install()
    assert (
        _visitors._gather_matchers is not matcher_hooks._ORIGINALS["_gather_matchers"]
    )
