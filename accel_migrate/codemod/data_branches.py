"""Branches on the data in a model's forward that decide which submodules run.

A question about one method of a model class (``forward`` or a method it calls):
where does a condition computed from the method's inputs (the batch) decide
whether a submodule of the model runs? The mixture-of-experts layer that skips
an expert no sample picks (``if idx.numel() == 0: continue`` before
``expert(x[idx])``), a refinement stage run ``if (x.abs() > t).any():``, a
``while`` loop of adaptive computation on the batch's halting scores.

The values followed are the method's parameters without a default (the tensors
it is handed) and what is computed from them, in the method, by assignment and
``for`` targets. What does not depend on the values of the batch is not
followed: its shape (``x.shape``, ``x.size(1)``, ``x.dim()``), its
type or device, whether an argument was given (``mask is not None``), the
model's own attributes (``self.training``), a parameter with a default (a flag
the caller passes: ``forward(x, with_aux=False)``), a parameter that every
call of the method on ``self`` in its class passes a literal (a flag too:
``self.apply_embedding(x, static, apply_masking=True)``). Its row count is followed
(``x.size(0)``, ``x.shape[0]``, ``len(x)``): after migration it is each
process's share of the batch, unequal in a short last batch (``if h.size(0) >
1: h = self.bn(h)``).

A submodule call is a call of ``self.<name>(...)`` (a submodule or a method that
runs them), of ``self.<name>[i](...)``, or of a name bound from them (``for
expert in self.experts``, ``block = self.blocks[i]``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from .subtrees import findall

#: Attributes of a tensor that do not depend on its values.
_VALUE_FREE_ATTRIBUTES = frozenset(
    {"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "layout"}
)
#: Methods of a tensor that do not depend on its values.
_VALUE_FREE_METHODS = frozenset({"size", "dim", "ndimension", "type", "get_device"})
#: Functions of a value that do not depend on a tensor's values.
_VALUE_FREE_FUNCTIONS = frozenset({"len", "isinstance", "type", "callable", "id"})


@dataclass(frozen=True)
class DataBranch:
    """A branch on the batch (``node``: an ``if``, a conditional expression or a
    ``while``) that decides whether ``call``, a submodule call, runs."""

    node: cst.CSTNode
    test: cst.BaseExpression
    call: cst.Call
    #: How the branch decides: "runs" (the call is in the branch) or the statement
    #: that skips it ("continue", "break", "return").
    how: str


def data_branches(
    function: cst.FunctionDef, owner: cst.ClassDef | None = None
) -> list[DataBranch]:
    """The branches on the batch in ``function`` that decide whether a submodule
    call runs (see the module docstring), outermost first, one per branch. With
    ``owner``, the class of ``function``: a call of one of its methods that runs
    nothing of ``self`` (``self.token_drop(labels)``: ``torch.where`` over a
    draw) is not a submodule call, since running it or not changes no
    parameter's gradient; and a parameter every call of the method on ``self``
    in the class passes a literal is a flag, not the batch
    (``_flag_parameters``)."""
    data = _data_names(function) - _flag_parameters(function, owner)
    if not data:
        return []
    modules = _module_names(function)
    plain = _plain_methods(owner) if owner is not None else set()
    found: list[DataBranch] = []
    for node in findall(function.body, m.OneOf(m.If(), m.IfExp(), m.While())):
        test = node.test  # type: ignore[attr-defined]
        if not _depends(test, data):
            continue
        inside = [node.body] + ([node.orelse] if node.orelse is not None else [])  # type: ignore[attr-defined]
        call = _first_call(inside, modules, plain)
        if call is not None:
            found.append(DataBranch(node, test, call, "runs"))
            continue
        if isinstance(node, cst.If):
            skipped = _skipped_call(function, node, modules, plain)
            if skipped is not None:
                found.append(DataBranch(node, test, *skipped))
    return _outermost(found)


#: Literals a caller passes as a flag (``apply_masking=False``).
_LITERAL = m.Name("True") | m.Name("False") | m.Name("None") | m.Integer() | m.Float()
_LITERAL |= m.SimpleString()


def _flag_parameters(function: cst.FunctionDef, cls: cst.ClassDef | None) -> set[str]:
    """The parameters of the method ``function`` that every call of it on
    ``self`` in ``cls`` passes a literal (the Temporal Fusion Transformer's
    ``self.apply_embedding(x, static, apply_masking=False)`` and ``...=True``):
    the same on every process, whatever its share of the batch. None where the
    class never calls the method, or a call spreads its arguments."""
    if cls is None:
        return set()
    calls = [
        c
        for c in findall(cls, m.Call(func=m.Attribute(value=m.Name("self"))))
        if c.func.attr.value == function.name.value  # type: ignore[attr-defined]
    ]
    if not calls or any(a.star for c in calls for a in c.args):
        return set()
    params = function.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    positional = positional[1:] if positional[:1] == ["self"] else positional
    flags = set()
    for name in positional + [p.name.value for p in params.kwonly_params]:
        values = []
        for call in calls:
            given = [
                a.value for a in call.args if a.keyword and a.keyword.value == name
            ]
            if not given and name in positional:
                at = positional.index(name)
                plain = [a.value for a in call.args if a.keyword is None]
                given = plain[at : at + 1]
            values.append(given[0] if given else None)
        if all(v is not None and m.matches(v, _LITERAL) for v in values):
            flags.add(name)
    return flags


def _data_names(function: cst.FunctionDef) -> set[str]:
    params = function.params
    names = {
        p.name.value
        for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        if p.default is None and p.name.value not in ("self", "cls")
    }
    if not names:
        return names
    assignments = [
        (targets, value)
        for targets, value in _bindings(function.body)
        if value is not None
    ]
    changed = True
    while changed:
        changed = False
        for targets, value in assignments:
            if _depends(value, names):
                new = targets - names
                if new:
                    names |= new
                    changed = True
    return names


def _bindings(
    body: cst.CSTNode,
) -> Iterator[tuple[set[str], cst.BaseExpression | None]]:
    for node in findall(
        body, m.OneOf(m.Assign(), m.AugAssign(), m.AnnAssign(), m.For())
    ):
        if isinstance(node, cst.Assign):
            targets: set[str] = set()
            for target in node.targets:
                targets |= _names(target.target)
            yield targets, node.value
        elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
            yield _names(node.target), node.value
        elif isinstance(node, cst.For):
            yield _names(node.target), node.iter


def _names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        found: set[str] = set()
        for element in target.elements:
            found |= _names(element.value)
        return found
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return set()  # `out[idx] = ...`, `self.x = ...`: no name of the method's


def _depends(expr: cst.BaseExpression, names: set[str]) -> bool:
    """Does ``expr`` read the values of one of ``names``?"""
    if isinstance(expr, cst.Name):
        return expr.value in names
    rows = _counted(expr)
    if rows is not None:
        return _depends(rows, names)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value in _VALUE_FREE_ATTRIBUTES:
            return False
        return _depends(expr.value, names)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _VALUE_FREE_METHODS:
            return False
        if isinstance(func, cst.Name) and func.value in _VALUE_FREE_FUNCTIONS:
            return False
    if isinstance(expr, cst.Comparison) and all(
        isinstance(t.operator, (cst.Is, cst.IsNot))
        and m.matches(t.comparator, m.Name("None"))
        for t in expr.comparisons
    ):
        return False  # `mask is not None`: whether it was given, not its values
    if isinstance(expr, (cst.Lambda, cst.FunctionDef)):
        return False
    return any(
        _depends(child, names)  # type: ignore[arg-type]
        for child in expr.children
        if isinstance(child, cst.CSTNode)
    )


def _counted(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The tensor whose row count ``expr`` is (``x.size(0)``, ``x.shape[0]``,
    ``len(x)``), or None: the one size that is each process's share."""
    if isinstance(expr, cst.Call) and len(expr.args) == 1:
        func, arg = expr.func, expr.args[0].value
        if m.matches(func, m.Attribute(attr=m.Name("size"))) and m.matches(
            arg, m.Integer("0")
        ):
            return func.value  # type: ignore[attr-defined]
        if m.matches(func, m.Name("len")):
            return arg
    if (
        isinstance(expr, cst.Subscript)
        and m.matches(expr.value, m.Attribute(attr=m.Name("shape")))
        and len(expr.slice) == 1
        and m.matches(expr.slice[0].slice, m.Index(value=m.Integer("0")))
    ):
        return expr.value.value  # type: ignore[attr-defined]
    return None


def _module_names(function: cst.FunctionDef) -> set[str]:
    """Names bound to a submodule of ``self`` (``for expert in self.experts``,
    ``block = self.blocks[i]``, ``for i, layer in enumerate(self.layers)``)."""
    found: set[str] = set()
    for targets, value in _bindings(function.body):
        if value is not None and _reads_self(value):
            found |= targets
    return found


def _reads_self(expr: cst.BaseExpression) -> bool:
    return bool(findall(expr, m.Attribute(value=m.Name("self")))) or m.matches(
        expr, m.Attribute(value=m.Name("self"))
    )


def _plain_methods(owner: cst.ClassDef) -> set[str]:
    """The methods of ``owner`` that call nothing of ``self`` (no submodule, no
    other method): a helper of tensors, not a part of the model."""
    found: set[str] = set()
    for statement in owner.body.body:
        if isinstance(statement, cst.FunctionDef) and not any(
            _is_module_call(call, set())  # type: ignore[arg-type]
            for call in findall(statement.body, m.Call())
        ):
            found.add(statement.name.value)
    return found


def _is_module_call(call: cst.Call, modules: set[str], plain: set[str] = frozenset()) -> bool:  # type: ignore[assignment]
    func = call.func
    if isinstance(func, cst.Name):
        return func.value in modules
    if m.matches(func, m.Attribute(value=m.Name("self"))) and func.attr.value in plain:  # type: ignore[attr-defined]
        return False  # `self.token_drop(labels)`: a method that runs no submodule
    root = func
    while isinstance(root, (cst.Attribute, cst.Subscript)):
        root = root.value
    return root is not func and m.matches(root, m.Name("self"))


def _first_call(
    nodes: list[cst.CSTNode], modules: set[str], plain: set[str] = frozenset()  # type: ignore[assignment]
) -> cst.Call | None:
    for node in nodes:
        for call in findall(node, m.Call()):
            if _is_module_call(call, modules, plain):  # type: ignore[arg-type]
                return call  # type: ignore[return-value]
    return None


def _skipped_call(
    function: cst.FunctionDef,
    branch: cst.If,
    modules: set[str],
    plain: set[str] = frozenset(),  # type: ignore[assignment]
) -> tuple[cst.Call, str] | None:
    """A submodule call that an exit in ``branch`` skips: ``continue``/``break``
    of a loop that makes the call, ``return`` of the function."""
    exits = findall(branch.body, m.OneOf(m.Continue(), m.Break(), m.Return()))
    if not exits:
        return None
    for exit_ in exits:
        if isinstance(exit_, cst.Return):
            call = _first_call([function.body], modules, plain)
            if call is not None:
                return call, "return"
            continue
        loop = _loop_of(function, exit_)
        if loop is not None:
            call = _first_call([loop.body], modules, plain)
            if call is not None:
                return call, "continue" if isinstance(exit_, cst.Continue) else "break"
    return None


def _loop_of(
    function: cst.FunctionDef, node: cst.CSTNode
) -> cst.For | cst.While | None:
    """The innermost loop of ``function`` that holds ``node``."""
    best: cst.For | cst.While | None = None
    for loop in findall(function.body, m.OneOf(m.For(), m.While())):
        if any(n is node for n in findall(loop.body, m.OneOf(m.Continue(), m.Break()))):  # type: ignore[attr-defined]
            best = loop  # type: ignore[assignment]  # preorder: inner loops come later
    return best


def _outermost(found: list[DataBranch]) -> list[DataBranch]:
    kept: list[DataBranch] = []
    for branch in found:
        if not any(
            any(
                n is branch.node
                for n in findall(outer.node, m.OneOf(m.If(), m.IfExp(), m.While()))
            )
            for outer in kept
        ):
            kept.append(branch)
    return kept
