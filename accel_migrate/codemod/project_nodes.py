"""Small ``ast`` readers shared by the project view's facts (``project_helpers``)
and the modules that read local functions with it: the nodes of a function's own
body (not of the functions or classes defined in it), what it assigns a name
there, ``self.x`` attributes, and the calls that hand back their own receiver."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_facts import HelperFact
    from .project_helpers import HelperFacts

#: Methods that hand back the object they are called on (``net.cuda()``).
SAME_OBJECT_METHODS = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half"})


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of ``function``'s body, not of functions or classes in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
        ):
            stack.extend(ast.iter_child_nodes(node))


def assigned_in(function: ast.AST, name: str) -> list[ast.expr]:
    """The values ``name = value`` binds in ``function``'s own body (not in
    functions or classes in it); none where ``function`` is no function."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    values = []
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values.append(node.value)
    return values


def self_attribute(expr: ast.expr) -> str | None:
    """``x`` of ``self.x``; None for anything else."""
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        return expr.attr
    return None


def same_object_of(value: ast.expr, name: str) -> bool:
    """``name.cuda()``, ``name.to(device)``: the same object as ``name``."""
    while (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in SAME_OBJECT_METHODS
    ):
        value = value.func.value
    return isinstance(value, ast.Name) and value.id == name


def built_model_phrase(
    reader: HelperFacts,
    node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef,
    methods: Sequence[ast.AST],
    phrase: Callable[[HelperFact], str],
) -> str:
    """``phrase`` of the first model of a local module that ``node`` builds (a
    class among its bases or called in its ``methods``; for a function, called in
    its body) and that has one (``HelperFact.batch_mixing``, ``share_padded``);
    "" when none has."""
    if isinstance(node, ast.ClassDef):
        calls = [n for m in methods for n in _own_nodes(m) if isinstance(n, ast.Call)]
        inner = [*node.bases] + [n.func for n in calls]
    else:
        calls = [n for n in _own_nodes(node) if isinstance(n, ast.Call)]
        inner = [n.func for n in calls]
    # a class handed to `functools.partial` is built where the partial is
    # called (`norm_layer=partial(SplitBatchNorm, num_splits=8)`)
    inner += [
        n.args[0]
        for n in calls
        if n.args and reader._dotted(n.func) == "functools.partial"
    ]
    for expr in inner:
        target = reader.resolve(expr)
        if not isinstance(target, tuple) or not target[1]:
            continue
        fact = reader._follow(target)
        if fact is not None and phrase(fact) and fact.returns == "model":
            return phrase(fact)
    return ""
