"""A sum-reduced loss whose element weights are computed in the step.

``F.binary_cross_entropy_with_logits(input, target, weight, reduction="sum")``
is a sum over the batch only while ``weight`` does not depend on it. SiamFC's
``BalancedLoss`` builds the weights from the batch's label map and divides them
by their sum (``weight /= weight.sum()``): the "sum" is a weighted mean over the
batch's elements, and summing the processes' losses (what a sum reduction asks
of the runtime) counts it once per process. Weights computed in the function
that calls the loss (from its parameters or its locals) are such a case, or may
be; weights read from the module, an attribute or a constant are not.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..patterns import string_value
from ..subtrees import findall
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

#: Losses whose third positional argument is the element weight.
_WEIGHT_THIRD = frozenset({"binary_cross_entropy", "binary_cross_entropy_with_logits"})


def step_weighted_sum(
    index: ModuleIndex,
    name: str,
    call: cst.Call,
    keywords: dict,
    spelled: str,
    function: cst.FunctionDef | None = None,
) -> str:
    """Why the sum-reduced loss ``call`` has no known reduction, where its
    ``weight`` is computed in ``function`` (by default the function that calls
    it); "" otherwise."""
    weight = keywords.get("weight")
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if weight is None and name in _WEIGHT_THIRD and len(positional) >= 3:
        weight = positional[2]
    if weight is None or m.matches(weight, m.Name("None")):
        return ""
    function = function or index.enclosing_function(call)
    if function is not None:
        own = _own_names(function)
    else:
        # a module-level loop (`w = torch.ones_like(y); w /= w.sum()` in the
        # body): the names it assigns, or the module's with no loop around
        own = _assigned_names(_outer_loop(index, call) or index.module)
    if not own & _read_names(weight):
        return ""
    return (
        f"`{spelled}` sums its terms weighted by `{code(weight)}`, computed "
        "in the step: a sum over the batch only where the weights do not "
        "depend on it (weights normalised over the batch, as "
        "`weight /= weight.sum()`, make it a mean); sum unweighted terms, "
        "or pass accel.backward(reduction=...) the reduction it has"
    )


def returned_weighted_sum(
    index: ModuleIndex, returns: list[cst.BaseExpression], method: cst.FunctionDef
) -> str:
    """``step_weighted_sum`` of the sum-reduced loss calls that ``method`` (a
    local criterion's ``forward``) returns."""
    for returned in returns:
        for call in findall(returned, m.Call()):
            assert isinstance(call, cst.Call)
            func = call.func
            name = func.attr.value if isinstance(func, cst.Attribute) else ""
            keywords = {a.keyword.value: a.value for a in call.args if a.keyword}
            if string_value(keywords.get("reduction")) != "sum":
                continue
            why = step_weighted_sum(index, name, call, keywords, code(func), method)
            if why:
                return why
    return ""


def _own_names(function: cst.FunctionDef) -> set[str]:
    """The parameters of ``function`` and the names it assigns."""
    params = function.params
    names = {
        p.name.value
        for p in [*params.posonly_params, *params.params, *params.kwonly_params]
    }
    return (names | _assigned_names(function.body)) - {"self", "cls"}


def _assigned_names(node: cst.CSTNode) -> set[str]:
    """The names assigned in ``node``: assignment and loop targets."""
    names: set[str] = set()
    targets = m.AssignTarget() | m.AugAssign() | m.AnnAssign() | m.For()
    for found in findall(node, targets):
        target = found.target  # type: ignore[attr-defined]
        names |= {n.value for n in findall(target, m.Name())}  # type: ignore[attr-defined]
    return names


def _outer_loop(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    """The outermost ``for`` or ``while`` loop around ``node``."""
    loop = None
    parent = index.parent(node)
    while parent is not None:
        if isinstance(parent, (cst.For, cst.While)):
            loop = parent
        parent = index.parent(parent)
    return loop


def _read_names(node: cst.CSTNode) -> set[str]:
    """The variables ``node`` reads (not the attribute names after a dot, nor
    keywords; a read of ``self.x`` is the object's state, not a value of the
    step)."""
    if isinstance(node, cst.Name):
        return {node.value}
    if isinstance(node, cst.Attribute):
        return _read_names(node.value)
    if isinstance(node, cst.Arg):
        return _read_names(node.value)
    return {n for child in node.children for n in _read_names(child)}


def ast_step_weighted(name: str, call: ast.Call, function: ast.AST) -> bool:
    """The same test in a local module's view (``ast``): does the sum-reduced
    ``F.<name>`` call weigh its terms by a value of ``function`` (a parameter
    or a variable it assigns)?"""
    weight = next((k.value for k in call.keywords if k.arg == "weight"), None)
    if weight is None and name in _WEIGHT_THIRD and len(call.args) >= 3:
        weight = call.args[2]
    if weight is None or (isinstance(weight, ast.Constant) and weight.value is None):
        return False
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return False
    params = function.args
    own = {
        a.arg
        for a in [*params.posonlyargs, *params.args, *params.kwonlyargs]
        + [a for a in (params.vararg, params.kwarg) if a is not None]
    }
    own |= {
        n.id
        for n in ast.walk(function)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    own -= {"self", "cls"}
    return any(isinstance(n, ast.Name) and n.id in own for n in ast.walk(weight))
