"""A model class of a local module whose ``forward`` runs a submodule only when
its batch says so (``data_branches``), read where another file builds the model.

AM039 reports such a branch in a model class of the file it migrates. A model
class of another module of the project (``from models import CascadeNet``) is
read here, as a project fact (``HelperFact.data_branch``): its ``forward`` and
the methods it calls on ``self``, then the classes of the project its body
builds (``self.block = MLPBlock(dim)``), whose facts say the same of theirs. The
class's source comes from its ``ast`` node (``ast.unparse``) and is read with
libcst, so that the branches are found by the same code as in the file itself.
Static only: nothing runs.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst

from .data_branches import DataBranch, data_branches

if TYPE_CHECKING:
    from .project_helpers import HelperFacts


def data_branch(facts: HelperFacts, cls: ast.ClassDef) -> str:
    """How a model class of a local module, or a class of the project it builds,
    decides on its batch whether a submodule runs, as a phrase for a finding
    (``"`CascadeNet.forward` (models.py, line 29) runs `self.refiner(...)` only
    when `hard.any()` says so"``); "" when it does not."""
    own = _own_branch(cls, facts.file)
    if own:
        return own
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call):
            continue
        target = facts.resolve(node.func)
        if not isinstance(target, tuple) or target == (facts.path, cls.name):
            continue
        fact = facts.view.fact(target, facts.roots, facts.script, facts.depth + 1)
        if fact is not None and fact.kind == "class" and fact.data_branch:
            return f"{fact.data_branch} (`{cls.name}` builds `{fact.name}`)"
    return ""


def _own_branch(cls: ast.ClassDef, file: str) -> str:
    from .model_methods import forward_methods

    try:
        module = cst.parse_module(ast.unparse(cls))
    except (cst.ParserSyntaxError, ValueError):  # pragma: no cover - unparse is valid
        return ""
    node = module.body[0]
    if not isinstance(node, cst.ClassDef):
        return ""
    for method in forward_methods(node):
        for branch in data_branches(method, node):
            return describe(
                branch,
                f"`{cls.name}.{method.name.value}` ({file}, line "
                f"{_line(cls, method.name.value, branch)})",
            )
    return ""


def describe(branch: DataBranch, where: str) -> str:
    """``where`` (a method, as the finding names it) and what ``branch`` decides."""
    test = cst.Module([]).code_for_node(branch.test)
    call = cst.Module([]).code_for_node(branch.call.func)
    if branch.how == "runs":
        return f"{where} runs `{call}(...)` only when `{test}` says so"
    return f"{where} skips `{call}(...)` (`{branch.how}`) when `{test}`"


def _line(cls: ast.ClassDef, method: str, branch: DataBranch) -> int:
    """The line of ``branch`` in the class's own file (the parsed source is the
    class unparsed: the branch is found again by its condition)."""
    test = cst.Module([]).code_for_node(branch.test)
    for function in cls.body:
        if isinstance(function, ast.FunctionDef) and function.name == method:
            for node in ast.walk(function):
                if isinstance(node, (ast.If, ast.IfExp, ast.While)) and (
                    ast.unparse(node.test) == test
                ):
                    return node.lineno
            return function.lineno
    return cls.lineno
