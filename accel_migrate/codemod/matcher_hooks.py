"""libcst's matcher visitors find their decorated hooks once per class, not per instance.

``MatcherDecoratableTransformer`` and ``MatcherDecoratableVisitor`` (the base of
libcst's ``AddImportsVisitor`` and of the import gatherer it starts) look through
every attribute of the instance for ``@m.visit``/``@m.leave``/``@m.call_if_*``
decorations each time one is made: about 600 attributes, 8-9 ms for the two
visitors that place the runtime import, the largest part of that step. Which
hooks a class has does not change from one instance to the next; a class found
to have none is remembered and answered with an empty table at once. A class
that has some is looked through as before (its tables hold the instance's own
bound methods).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from libcst.matchers import _visitors as _matcher_visitors

_GATHERERS = (
    "_gather_matchers",
    "_gather_constructed_visit_funcs",
    "_gather_constructed_leave_funcs",
)
_ORIGINALS: dict[str, Callable[[object], dict[Any, Any]]] = {
    name: getattr(_matcher_visitors, name) for name in _GATHERERS
}


def _once_per_class(
    gather: Callable[[object], dict[Any, Any]],
) -> Callable[[object], dict[Any, Any]]:
    without: set[type] = set()

    def gathered(obj: object) -> dict[Any, Any]:
        if type(obj) in without:
            return {}  # a fresh table: the matcher table is filled during a visit
        found = gather(obj)
        if not found:
            without.add(type(obj))
        return found

    return gathered


def install() -> None:
    for name, gather in _ORIGINALS.items():
        setattr(_matcher_visitors, name, _once_per_class(gather))


def uninstall() -> None:
    for name, gather in _ORIGINALS.items():
        setattr(_matcher_visitors, name, gather)
