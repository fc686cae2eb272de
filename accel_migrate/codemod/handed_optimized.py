"""The models a trainer class is handed that it builds an optimizer over.

A library trainer (``HelperFact.trains``) names the ``__init__`` parameter its
backward step runs (``trained_parameter``). A GAN trainer is handed two models
and trains both: akanimax/pro_gan_pytorch's ``ProGAN(gen, dis, device)`` runs
``self.gen`` in ``optimize_discriminator``'s step and hands ``self.dis`` to the
loss, and its ``train()`` builds ``Adam(params=self.gen.parameters(), ...)`` and
``Adam(params=self.dis.parameters(), ...)``. A caller that prepared only the
first would train the second unsynchronised on every process;
``optimized_parameters`` names every ``__init__`` parameter stored on ``self``
whose ``.parameters()`` feed an optimizer a method of the class builds, so the
caller prepares each model it hands for one (``optimized_models``). The
optimizer may be handed an attribute that holds those parameters
(openai/improved-diffusion's ``TrainLoop``: ``self.model_params =
list(self.model.parameters())``, then ``AdamW(self.model_params, ...)``):
an attribute the class's methods assign is followed to its values, a few
assignments deep.

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .library_trainers import Lineage, _methods, _own_method, _stored_through_bases
from .project_nodes import _own_nodes, self_attribute

_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


def optimized_parameters(
    lineage: Lineage, is_optimizer: Callable[[ast.Call], bool]
) -> tuple[tuple[str, int], ...]:
    """(parameter, position among the positional parameters after ``self``; -1
    keyword only) for each ``__init__`` parameter stored on ``self`` whose
    ``self.X.parameters()`` (or ``named_parameters()``) is handed to an
    optimizer built in a method of the class (``is_optimizer``), in the order
    of the optimizers; () when there is none."""
    owner = next(
        (i for i, cls in enumerate(lineage) if _own_method(cls, "__init__")), None
    )
    if owner is None:
        return ()
    init = _own_method(lineage[owner], "__init__")
    stored = _stored_through_bases(lineage[owner:])
    if init is None or not stored:
        return ()
    positional = [a.arg for a in [*init.args.posonlyargs, *init.args.args][1:]]
    found: dict[str, int] = {}
    assigned = _self_assignments(lineage)
    for method in _methods(lineage):
        calls = sorted(
            (n for n in _own_nodes(method) if isinstance(n, ast.Call)),
            key=lambda n: (n.lineno, n.col_offset),
        )
        for call in calls:
            if not is_optimizer(call):
                continue
            for attr in _optimized_attributes(call, assigned):
                name = stored.get(attr)
                if name is not None and name not in found:
                    found[name] = positional.index(name) if name in positional else -1
    return tuple(found.items())


def function_optimized_parameters(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    is_optimizer: Callable[[ast.Call], bool],
) -> tuple[tuple[str, int], ...]:
    """(parameter, positional index; -1 keyword only) for each parameter of a
    plain function whose ``.parameters()`` (or ``named_parameters()``) an
    optimizer built in its body is handed, directly
    (pytorch-adda's ``train_src(encoder, classifier, data_loader)``:
    ``optim.Adam(list(encoder.parameters()) + list(classifier.parameters()))``),
    and never bound again there; () when there is none."""
    positional, named = _kept_parameters(function)
    found: dict[str, int] = {}
    calls = sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for call in calls:
        if not is_optimizer(call):
            continue
        handed = [k.value for k in call.keywords if k.arg == "params"]
        if call.args and not isinstance(call.args[0], ast.Starred):
            handed.append(call.args[0])
        for value in handed:
            for node in ast.walk(value):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _PARAMETER_METHODS
                    and isinstance(node.func.value, ast.Name)
                ):
                    name = node.func.value.id
                    if name in named and name not in found:
                        found[name] = (
                            positional.index(name) if name in positional else -1
                        )
    return tuple(found.items())


def parameter_methods(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> tuple[tuple[str, int, str, int], ...]:
    """(parameter, positional index or -1, method, line) for each call of a method on a parameter of
    ``function`` never bound again there (pytorch-ewc's ``train(model, ...)``
    calling ``model.consolidate(model.estimate_fisher(...))``): what a caller
    that hands it a prepared model has run on that model."""
    positional, named = _kept_parameters(function)
    found: list[tuple[str, int, str, int]] = []
    for node in _own_nodes(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in named
        ):
            name = node.func.value.id
            position = positional.index(name) if name in positional else -1
            found.append((name, position, node.func.attr, node.lineno))
    return tuple(sorted(set(found), key=lambda f: (f[3], f[0], f[2])))


def _kept_parameters(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> tuple[list[str], set[str]]:
    """(the positional parameters in order, every parameter never bound again in
    ``function``: no assignment, loop or ``with`` target, ``del``, ``global`` or
    ``nonlocal`` of its name)."""
    arguments = function.args
    positional = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    rebound = {
        n.id
        for n in ast.walk(function)
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)
    } | {
        name
        for n in ast.walk(function)
        if isinstance(n, (ast.Global, ast.Nonlocal))
        for name in n.names
    }
    named = (set(positional) | {a.arg for a in arguments.kwonlyargs}) - rebound
    return positional, named


def _self_assignments(lineage: Lineage) -> dict[str, list[ast.expr]]:
    """``X`` -> the values the class's methods assign ``self.X`` (``self.X = v``)."""
    found: dict[str, list[ast.expr]] = {}
    for method in _methods(lineage):
        for node in _own_nodes(method):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    attr = self_attribute(target)
                    if attr is not None:
                        found.setdefault(attr, []).append(node.value)
    return found


#: How many ``self.Y = ...`` assignments deep the handed parameters are followed.
_DEPTH = 3


def _optimized_attributes(
    call: ast.Call, assigned: dict[str, list[ast.expr]] | None = None
) -> list[str]:
    """``X`` of each ``self.X.parameters()`` in the parameters an optimizer call
    is handed (its first positional argument or ``params=``), also through an
    attribute assigned such parameters (``self.model_params =
    list(self.model.parameters())``: ``assigned``)."""
    assigned = assigned or {}
    handed = [k.value for k in call.keywords if k.arg == "params"]
    if call.args and not isinstance(call.args[0], ast.Starred):
        handed.append(call.args[0])
    found: list[str] = []
    queue = [(value, 0) for value in handed]
    followed: set[str] = set()
    while queue:
        value, depth = queue.pop(0)
        for node in ast.walk(value):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _PARAMETER_METHODS
            ):
                attr = self_attribute(node.func.value)
                if attr is not None and attr not in found:
                    found.append(attr)
            attr = self_attribute(node) if isinstance(node, ast.Attribute) else None
            if attr in assigned and attr not in followed and depth < _DEPTH:
                followed.add(attr)
                queue += [(v, depth + 1) for v in assigned[attr]]
    return found
