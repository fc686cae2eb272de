"""Test modules: pytest's and unittest's files are not training entry points.

Light to import (``ast`` only): the command line's cache keys a result on
whether the file is named as a test module.
"""

from __future__ import annotations

import ast


def _module_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py")


def test_module_name(path: str) -> bool:
    """Is ``path`` named as pytest names test modules (the only way a file's path
    decides its migration)?"""
    name = _module_name(path)
    return name == "conftest" or name.startswith("test_") or name.endswith("_test")


def is_test_module(path: str, tree: ast.Module) -> bool:
    """A pytest or unittest file: ``conftest.py``, or ``test_*.py`` / ``*_test.py``
    that defines tests (a ``test*`` function, a class with ``test*`` methods, or a
    ``TestCase`` subclass). It may train a small model, but it is not a training
    entry point: nobody launches it on N processes."""
    name = _module_name(path)
    if name == "conftest":
        return True
    if not test_module_name(path):
        return False
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if statement.name.startswith("test"):
                return True
        elif isinstance(statement, ast.ClassDef):
            if any(_last_name(base) == "TestCase" for base in statement.bases):
                return True
            if any(
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and item.name.startswith("test")
                for item in statement.body
            ):
                return True
    return False


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None
