"""The methods a class's method runs on ``self``, transitively: one walk for the
``ast`` readers of the project view (``stochastic_layers``) and the ``libcst``
readers of the file (``model_methods.forward_methods``). No parser is imported
here: each caller says how to read a method's ``self.`` calls."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

M = TypeVar("M")


def closure(
    start: str, by_name: dict[str, M], self_calls: Callable[[M], Iterable[str]]
) -> list[M]:
    """The method ``start`` of ``by_name`` and those it calls on ``self``
    (``self_calls``), transitively, in the order they are reached."""
    found: list[M] = []
    todo = [start]
    while todo:
        method = by_name.get(todo.pop())
        if method is None or method in found:
            continue
        found.append(method)
        todo.extend(self_calls(method))
    return found
