"""Random draws in the functions and classes of a local module (the project
view's part that finds them): ``HelperFact.draws``.

PyTorch-GAN's ``cyclegan.py`` swaps generated images through a
``ReplayBuffer.push_and_pop`` of ``utils.py`` that calls ``random.uniform`` and
``random.randint`` per image; pytorch-cifar100's ``get_training_dataloader`` in
``utils.py`` builds ``transforms.RandomCrop``; a VAE of ``models.py`` draws
``torch.randn_like(std)`` in its ``forward``. After migration each process
draws its own numbers for its own share of the batch, so the losses cannot
match the original's step for step. In the script itself AM020 reports such
draws; this module finds them in the modules the script imports, for AM020 to
report where the script calls them (``imported_draws``).

A draw is a call of a random function (``is_random_draw``) or of a tensor
method that fills a tensor with random numbers (``.normal_()``,
``.bernoulli_()``, ``.rsample()``, ``torch.distributions.X(...).sample()``);
the construction of a torchvision random augmentation is recorded apart
(``augmentation``): it draws nothing itself, but each time a data loader
applies it. A draw from an explicit ``generator=`` is
the same on every process and not counted. The module's own functions and the
class's ``self.`` methods that a function calls are followed.

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .project_helpers import _own_nodes
from .random_names import (
    DISTRIBUTIONS,
    DRAW_METHODS,
    is_random_draw,
    random_transform,
)

#: How many calls deep the module's functions and methods are followed.
_DEPTH = 3

Definition = ast.FunctionDef | ast.AsyncFunctionDef


def function_draws(
    function: Definition,
    functions: dict[str, Definition],
    dotted: Callable[[ast.expr], str],
) -> str:
    """The first draw ``function`` makes (itself or through the module's
    functions it calls), spelled for a finding; "" if none."""
    return _draw(function, functions, {}, _draw_of(dotted), _DEPTH, set())


def augmentation(
    definition: Definition | ast.ClassDef,
    functions: dict[str, Definition],
    dotted: Callable[[ast.expr], str],
) -> str:
    """The first torchvision random augmentation a function (or any method of a
    class) builds, itself or through the module's functions; "" if none. Built
    once, it draws each time the data loader applies it to a sample."""
    if isinstance(definition, ast.ClassDef):
        methods = _methods(definition)
        for method in methods.values():
            found = _draw(
                method, functions, methods, _transform_of(dotted), _DEPTH, set()
            )
            if found:
                return found
        return ""
    return _draw(definition, functions, {}, _transform_of(dotted), _DEPTH, set())


def class_draws(
    cls: ast.ClassDef,
    functions: dict[str, Definition],
    dotted: Callable[[ast.expr], str],
) -> tuple[tuple[str, str], ...]:
    """(method, its first draw) for each method of ``cls`` that draws (itself,
    through ``self.`` methods or the module's functions)."""
    methods = _methods(cls)
    found = []
    for name, method in methods.items():
        draw = _draw(method, functions, methods, _draw_of(dotted), _DEPTH, set())
        if draw:
            found.append((name, draw))
    return tuple(found)


def _methods(cls: ast.ClassDef) -> dict[str, Definition]:
    return {
        s.name: s
        for s in cls.body
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _draw(
    function: Definition,
    functions: dict[str, Definition],
    methods: dict[str, Definition],
    test: Callable[[ast.Call], str],
    depth: int,
    seen: set[int],
) -> str:
    if depth < 0 or id(function) in seen:
        return ""
    seen.add(id(function))
    calls = sorted(
        (n for n in _own_nodes(function) if isinstance(n, ast.Call)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for call in calls:
        found = test(call)
        if found:
            return found
    for call in calls:
        inner = _local_callee(call, functions, methods)
        if inner is not None:
            found = _draw(inner, functions, methods, test, depth - 1, seen)
            if found:
                return found
    return ""


def _draw_of(dotted: Callable[[ast.expr], str]) -> Callable[[ast.Call], str]:
    """A call's random draw, spelled for a finding ("" if it draws nothing)."""

    def test(call: ast.Call) -> str:
        if any(k.arg == "generator" for k in call.keywords):
            return ""  # seeded alike on every process
        name = dotted(call.func)
        if name and is_random_draw(name):
            return f"`{name}`"
        func = call.func
        if isinstance(func, ast.Attribute):
            if func.attr in DRAW_METHODS or func.attr == "rsample":
                return f"`.{func.attr}()`"
            receiver = func.value
            if (
                func.attr in ("sample", "sample_n")
                and isinstance(receiver, ast.Call)
                and dotted(receiver.func).startswith(DISTRIBUTIONS)
            ):
                return f"`.{func.attr}()`"
        return ""

    return test


def _transform_of(dotted: Callable[[ast.expr], str]) -> Callable[[ast.Call], str]:
    """A call that builds a random augmentation, spelled for a finding."""

    def test(call: ast.Call) -> str:
        name = dotted(call.func)
        return f"`{name}`" if name and random_transform(name) else ""

    return test


def _local_callee(
    call: ast.Call,
    functions: dict[str, Definition],
    methods: dict[str, Definition],
) -> Definition | None:
    func = call.func
    if isinstance(func, ast.Name):
        return functions.get(func.id)
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
    ):
        return methods.get(func.attr)
    return None
