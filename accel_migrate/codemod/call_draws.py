"""Whether one call of a local module draws random numbers, or builds a random
augmentation, spelled for a finding (``project_draws``): the tests its walk
over a module's functions and a class's methods applies to each call, reading
names with that module's own imports (``dotted``).

Static only: ``ast``; nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .random_names import DISTRIBUTIONS, DRAW_METHODS, is_random_draw, random_transform


def draw_of(dotted: Callable[[ast.expr], str]) -> Callable[[ast.Call], str]:
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


def transform_of(dotted: Callable[[ast.expr], str]) -> Callable[[ast.Call], str]:
    """A call that builds a random augmentation, spelled for a finding."""

    def test(call: ast.Call) -> str:
        name = dotted(call.func)
        return f"`{name}`" if name and random_transform(name) else ""

    return test
