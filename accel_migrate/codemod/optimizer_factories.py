"""Optimizer factories of a local module (the project view's part that reads them).

Real projects build their optimizer in a helper module: timm's
``create_optimizer(args, model)``, mmcv's ``build_optimizer(model, cfg)``, a
tutorial's ``make_optimizer(model.parameters(), args)``. Such a function is an
*optimizer factory* when

- every ``return`` hands back an optimizer it builds (``kind_of`` is
  "optimizer": a ``torch.optim`` class, or one looked up by name in a module-level
  dict of them, ``OPTIMIZERS[name](params, **kwargs)``, see ``optimizer_table``),
- and what that optimizer trains comes from one of its parameters only:

  - "model": every ``.parameters()`` / ``.named_parameters()`` /
    ``.modules()`` / ``.named_modules()`` it reads (itself, or through the
    functions of its module it hands that parameter to: timm's
    ``param_groups_weight_decay(model, wd)``) is that parameter's, and it reads
    no other one;
  - "params": the optimizer is built over that parameter itself
    (``optim.SGD(params, lr=...)``) and the function reads no model's
    parameters.

The caller then knows which of its models the optimizer trains: the argument it
hands for that parameter (``build_optimizer(cfg, model)``), or the model whose
``.parameters()`` it hands (``make_optimizer(model.parameters(), args)``),
``HelperFact.optimizer_over``; see ``optimizer_helpers`` for the calling side.

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .names import is_optimizer_class

if TYPE_CHECKING:
    from .project_helpers import HelperFacts
    from .project_view import Target

#: Methods of a module that read what an optimizer may train.
PARAMETER_READS = frozenset(
    {"parameters", "named_parameters", "modules", "named_modules"}
)
#: How many calls deep a handed model is followed into the module's functions.
_DEPTH = 3

Functions = dict[str, "ast.FunctionDef | ast.AsyncFunctionDef"]


def optimizer_table(
    expr: ast.expr,
    assigned: dict[str, list[ast.expr]],
    dotted: Callable[[ast.expr], str],
) -> bool:
    """Is ``expr`` a subscript of a module-level dict whose every value is an
    optimizer class (``OPTIMIZERS[opt_name]`` with ``OPTIMIZERS = {"sgd":
    torch.optim.SGD, "adamw": torch.optim.AdamW}``), assigned once?"""
    if not isinstance(expr, ast.Subscript) or not isinstance(expr.value, ast.Name):
        return False
    values = assigned.get(expr.value.id, [])
    if len(values) != 1 or not isinstance(values[0], ast.Dict):
        return False
    table = values[0]
    return (
        bool(table.values)
        and None not in table.keys
        and all(is_optimizer_class(dotted(v)) for v in table.values)
    )


def class_expression(
    func: ast.expr,
    local: Callable[[str], list[ast.expr]],
    assigned: dict[str, list[ast.expr]],
    dotted: Callable[[ast.expr], str],
) -> bool:
    """Is ``func`` (what a call calls) an optimizer class looked up by name:
    ``OPTIMIZERS[name]`` (``optimizer_table``), ``getattr(torch.optim, name)``, or
    a local variable whose one value is one of them (``optim_cls =
    getattr(torch.optim, kwargs.pop("type"))``, mmcv's builder)?"""
    if isinstance(func, ast.Name):
        values = local(func.id)
        if len(values) != 1:
            return False
        func = values[0]
    if optimizer_table(func, assigned, dotted):
        return True
    return (
        isinstance(func, ast.Call)
        and dotted(func.func) == "builtins.getattr"
        and len(func.args) == 2
        and not func.keywords
        and dotted(func.args[0]) == "torch.optim"
    )


def optimizer_class(
    values: list[ast.expr],
    assigned: dict[str, list[ast.expr]],
    dotted: Callable[[ast.expr], str],
) -> bool:
    """Is every returned value an optimizer class: one named
    (``torch.optim.SGD``), looked up in a module-level dict of them
    (``OPTIMIZERS[name]``), or in a dict display of them (``{"sgd":
    torch.optim.SGD, "adam": torch.optim.Adam}[name]``)?"""

    def one(value: ast.expr) -> bool:
        if is_optimizer_class(dotted(value)):
            return True
        if class_expression(value, lambda _: [], assigned, dotted):
            return True  # `return getattr(torch.optim, name)`
        if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Dict):
            table = value.value
            return (
                bool(table.values)
                and None not in table.keys
                and all(is_optimizer_class(dotted(v)) for v in table.values)
            )
        return optimizer_table(value, assigned, dotted)

    return bool(values) and all(one(v) for v in values)


def factory_over(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    dotted: Callable[[ast.expr], str],
    scan: Any,
    local: Callable[[str], list[ast.expr]],
) -> tuple[str, int, str]:
    """``HelperFact.optimizer_over`` of a function whose every return is an
    optimizer (``scan``: its module's ``project_scans._Scan``; ``local``: what a
    name of the function is assigned)."""
    built = [
        node
        for node in _own_nodes(function)
        if isinstance(node, ast.Call)
        and (
            is_optimizer_class(dotted(node.func))
            or class_expression(node.func, local, scan.assigned, dotted)
        )
    ]
    return optimizer_over(function, built, scan.functions)


def optimizer_over(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    optimizers: list[ast.Call],
    functions: Functions,
) -> tuple[str, int, str]:
    """(parameter, position among the positional parameters or -1, "model" or
    "params") for an optimizer factory whose every return builds one of
    ``optimizers``; ("", -1, "") where what it trains is not one parameter's."""
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    names = [*positional, *(a.arg for a in function.args.kwonlyargs)]
    read = _reads(function, functions, 0)
    if read is None:
        return ("", -1, "")
    if len(read) == 1:
        name = next(iter(read))
        if name in names:
            return (name, positional.index(name) if name in positional else -1, "model")
        return ("", -1, "")
    if read:
        return ("", -1, "")
    handed = [_first_argument(call) for call in optimizers]
    spelled = {h.id if isinstance(h, ast.Name) else None for h in handed}
    if len(spelled) == 1:
        name = spelled.pop()
        if name is not None and name in names and not _rebound(function, name):
            return (
                name,
                positional.index(name) if name in positional else -1,
                "params",
            )
    return ("", -1, "")


def _first_argument(call: ast.Call) -> ast.expr | None:
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "params"), None)


def _reads(
    function: ast.FunctionDef | ast.AsyncFunctionDef, functions: Functions, depth: int
) -> set[str] | None:
    """The parameters of ``function`` whose parameters or modules it reads
    (itself or in the module's functions it hands them to); None when it reads
    those of anything else (a global model, an attribute) or cannot be followed."""
    if depth > _DEPTH:
        return None
    names = {
        a.arg
        for a in [
            *function.args.posonlyargs,
            *function.args.args,
            *function.args.kwonlyargs,
        ]
    }
    found: set[str] = set()
    for node in _own_nodes(function):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in PARAMETER_READS:
            receiver = func.value
            if not isinstance(receiver, ast.Name) or receiver.id not in names:
                return None
            if _rebound(function, receiver.id):
                return None
            found.add(receiver.id)
            continue
        handed = [
            (i, a.id)
            for i, a in enumerate(node.args)
            if isinstance(a, ast.Name) and a.id in names
        ]
        if not handed or not isinstance(func, ast.Name) or func.id not in functions:
            continue
        inner = functions[func.id]
        inner_positional = [a.arg for a in [*inner.args.posonlyargs, *inner.args.args]]
        inner_read = _reads(inner, functions, depth + 1)
        if inner_read is None:
            return None
        at = dict(handed)
        for name in inner_read:
            position = inner_positional.index(name) if name in inner_positional else -1
            if position not in at:
                return None  # it reads a parameter this call does not hand it
            found.add(at[position])
    return found


def _rebound(function: ast.AST, name: str) -> bool:
    """Is ``name`` assigned in ``function`` (then it is not the caller's value)?"""
    for node in _own_nodes(function):
        targets: Iterable[ast.expr] = ()
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With)):
            targets = (
                [getattr(node, "target", None)]
                if not isinstance(node, ast.With)
                else [
                    i.optional_vars for i in node.items if i.optional_vars is not None
                ]
            )
        for target in targets:
            if target is not None and any(
                isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)
            ):
                return True
    return False


def _own_nodes(function: ast.AST) -> Iterable[ast.AST]:
    """The nodes of ``function``'s body, not of functions or classes in it."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def optimizer_class_target(reader: HelperFacts, target: str | Target | None) -> bool:
    """Does calling ``target`` (``reader.resolve`` of a call's function) build
    an optimizer: a library optimizer class, or a local class deriving from
    one (``class MySGD(torch.optim.SGD)``, ``HelperFact.optimizer_subclass``)?"""
    if isinstance(target, str):
        return is_optimizer_class(target)
    if not isinstance(target, tuple):
        return False
    fact = reader._follow(target)
    return fact is not None and fact.optimizer_subclass
