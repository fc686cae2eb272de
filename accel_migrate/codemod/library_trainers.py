"""Library trainer classes: a class of a local module that trains the model its
caller hands it (minGPT's ``Trainer(config, model, dataset)`` in
``mingpt/trainer.py``, whose ``run`` calls ``self.loss.backward()``).

The training setup of such a project is split across files: the model is built in
the script, and its optimizer, loader and backward live in the library. AM004
migrates a setup whole or not at all, one file at a time, so the library file is
left unmigrated (its model is a parameter no call of that file passes), and a
script that hands its model to the class must be left unmigrated too: sharding the
script's loaders, reducing its metrics or gating its logs while each process
trains a full, unsynchronised copy in the library would mix a migrated half with
an unmigrated one. ``handed_in_training`` finds such classes for the project view
(``HelperFact.trains``).

A class that trains models of its own is split the same way (the pix2pix /
CycleGAN ``Pix2PixModel``: ``__init__`` builds ``self.netG`` and its
``torch.optim.Adam``, ``optimize_parameters`` calls ``self.loss_G.backward()``,
and the script only loops ``model.set_input(data); model.optimize_parameters()``
over its loader): ``trains_own_models`` finds it (``HelperFact.trains_own``).
Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

from .project_helpers import _own_nodes

#: Methods that show a value is used as a model (not ``zero_grad``: an optimizer
#: has one too).
_MODEL_METHODS = frozenset(
    {"train", "parameters", "named_parameters", "configure_optimizers"}
)


def handed_in_training(cls: ast.ClassDef) -> str:
    """How ``cls`` trains with what it is handed (``_handed``); "" if not."""
    found = _handed(cls)
    return found[0] if found is not None else ""


def trained_parameter(cls: ast.ClassDef) -> tuple[str, int]:
    """The ``__init__`` parameter whose value ``cls`` trains (``handed_in_training``)
    and its position among the positional parameters after ``self`` (-1: keyword
    only); ("", -1) when it trains none."""
    found = _handed(cls)
    if found is None:
        return ("", -1)
    init = next(
        m for m in cls.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"
    )
    positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args][1:]]
    name = found[1]
    return (name, positional.index(name) if name in positional else -1)


def backpropagated_attributes(cls: ast.ClassDef) -> tuple[tuple[str, int], ...]:
    """``self.X`` that a method of ``cls`` backpropagates (``self.loss.backward()``,
    or ``accel.backward(self.loss, ...)`` once migrated), with the line of the
    first backward of each: the losses an instance hands its callers to read."""
    found: dict[str, int] = {}
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _own_nodes(method):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "backward"
            ):
                continue
            tensor = node.args[0] if node.args else node.func.value
            attr = _self_attribute(tensor)
            if attr is not None:
                found.setdefault(attr, node.lineno)
    return tuple(sorted(found.items()))


def _handed(cls: ast.ClassDef) -> tuple[str, str] | None:
    """How ``cls`` trains with what it is handed, as a phrase for a finding
    (``"`run` calls backward (line 76) in a step that runs `self.model`, which
    it is handed (`__init__`'s `model`)"``), and that parameter; None when it
    does not.

    The class must store an ``__init__`` parameter on ``self`` and, in a method
    that calls ``.backward()``, call that attribute, or a local bound to it, as a
    model (``model(x, y)``, ``model.train()``, ``model.parameters()``...)."""
    methods = [
        m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    init = next((m for m in methods if m.name == "__init__"), None)
    if not isinstance(init, ast.FunctionDef):
        return None
    stored = _stored_parameters(init)
    if not stored:
        return None
    for method in methods:
        backward = next(
            (
                node
                for node in _own_nodes(method)
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "backward"
            ),
            None,
        )
        if backward is None:
            continue
        used = _used_as_model(method, set(stored))
        if used is not None:
            return (
                f"`{method.name}` calls backward (line {backward.lineno}) in a step "
                f"that runs `self.{used}`, which it is handed (`__init__`'s "
                f"`{stored[used]}`)",
                stored[used],
            )
    return None


def trains_own_models(
    cls: ast.ClassDef, is_optimizer: Callable[[ast.Call], bool]
) -> str:
    """How ``cls``, not a model class, trains models it builds itself, as a
    phrase for a finding (``"`backward_G` calls backward (line 40), and
    `__init__` builds an optimizer (`torch.optim.Adam(...)`, line 21)"``); ""
    when it does not: a method calls ``.backward()`` and a method builds an
    optimizer (``is_optimizer``: the call constructs a ``torch.optim`` class)."""
    methods = [
        m for m in cls.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    backward = optimizer = None
    for method in methods:
        for node in _own_nodes(method):
            if not isinstance(node, ast.Call):
                continue
            if (
                backward is None
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "backward"
            ):
                backward = (method.name, node)
            elif optimizer is None and is_optimizer(node):
                optimizer = (method.name, node)
    if backward is None or optimizer is None:
        return ""
    built = ast.unparse(optimizer[1].func)
    return (
        f"`{backward[0]}` calls backward (line {backward[1].lineno}), and "
        f"`{optimizer[0]}` builds an optimizer (`{built}(...)`, line "
        f"{optimizer[1].lineno})"
    )


def _stored_parameters(init: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """``self.attr = param`` in ``__init__``: attr -> param."""
    arguments = init.args
    names = {
        a.arg
        for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs][1:]
    }
    found: dict[str, str] = {}
    for node in _own_nodes(init):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Name):
            continue
        if node.value.id not in names:
            continue
        for target in node.targets:
            attr = _self_attribute(target)
            if attr is not None:
                found.setdefault(attr, node.value.id)
    return found


def _used_as_model(
    method: ast.FunctionDef | ast.AsyncFunctionDef, attributes: set[str]
) -> str | None:
    """The stored attribute ``method`` uses as a model, directly or through a
    local bound to it (``model, config = self.model, self.config``)."""
    aliases: dict[str, str] = {}
    for node in _own_nodes(method):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name, value in _pairs(target, node.value):
                    attr = _self_attribute(value)
                    if attr in attributes:
                        aliases[name] = attr  # type: ignore[index]

    def stored(expr: ast.expr) -> str | None:
        attr = _self_attribute(expr)
        if attr in attributes:
            return attr
        if isinstance(expr, ast.Name):
            return aliases.get(expr.id)
        return None

    for node in _own_nodes(method):
        if not isinstance(node, ast.Call):
            continue
        called = stored(node.func)
        if called is not None:
            return called
        if isinstance(node.func, ast.Attribute) and node.func.attr in _MODEL_METHODS:
            receiver = stored(node.func.value)
            if receiver is not None:
                return receiver
    return None


def _pairs(target: ast.expr, value: ast.expr) -> Iterable[tuple[str, ast.expr]]:
    """(name, value) for ``a = v`` and element-wise ``a, b = v, w``."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
    ):
        for inner, item in zip(target.elts, value.elts, strict=True):
            yield from _pairs(inner, item)


def _self_attribute(expr: ast.expr) -> str | None:
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        return expr.attr
    return None
