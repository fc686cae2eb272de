"""Which variables may hold a model, a loader, an optimizer: ``ModuleIndex.tagged``
and what it follows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst

from .index_syntax import (
    Key,
    Seed,
    bind_arguments,
    method_call,
)

#: Evaluate ``tagged``'s fixpoint by a worklist (False: in rounds over every
#: entry until none changes, as before round 20; for comparisons).
WORKLIST = True

_VALUES, _UNPACKED, _ARGUMENT = 0, 1, 2


class Tagging:
    """A part of ``ModuleIndex`` (``analysis``): its methods read the index's
    tree, scopes and variables."""

    # -- tagging variables ------------------------------------------------------------------
    def tagged(
        self,
        seed: Seed,
        same_object: frozenset[str] = frozenset(),
        through: (
            Callable[[cst.BaseExpression], cst.BaseExpression | None] | None
        ) = None,
        returns: bool = False,
        positional: Callable[[cst.BaseExpression, int, int], bool] | None = None,
    ) -> set[Key]:
        """Variables that may hold what ``seed`` recognises.

        ``same_object``: methods that return their receiver (``.to`` on a module).
        ``through``: the argument a wrapping call stands for, if it is one
        (``tqdm(loader)`` for a loader).
        ``returns``: a call of a local function holds it when every ``return`` of
        the function does (``loader = make_loader()``), and ``a, b = f()`` unpacks
        it where every ``return`` of ``f`` is a tuple display of that length whose
        item holds it (``return train_loader, val_loader``).
        ``positional``: whether ``value``'s item ``i`` of ``n`` holds it, for
        ``a, b = value`` the module cannot see into (another module's function).
        """
        tagged: set[Key] = set()
        active: set[cst.FunctionDef] = set()
        returned_by: dict[cst.FunctionDef, list[cst.BaseExpression | None]] = {}

        def returned(call: cst.Call) -> list[cst.BaseExpression] | None:
            function = self.local_function(call.func)
            if function is None or function in active:
                return None
            if function not in returned_by:
                returned_by[function] = self.function_syntax.returned_values(function)
            values = returned_by[function]
            if not values or any(v is None for v in values):
                return None
            return values  # type: ignore[return-value]

        def holds_all(function_call: cst.Call, pick: Callable[[Any], Any]) -> bool:
            values = returned(function_call)
            if values is None:
                return False
            function = self.local_function(function_call.func)
            active.add(function)  # type: ignore[arg-type]
            try:
                return all(holds(pick(v)) for v in values)
            finally:
                active.discard(function)  # type: ignore[arg-type]

        missed: list[Key] = []  # the variables a holds() found untagged

        def holds(expr: cst.BaseExpression | None) -> bool:
            while expr is not None:
                if seed(expr):
                    return True
                if isinstance(expr, cst.IfExp):
                    # `train_loader if phase == "train" else valid_loader`: it
                    # holds one where both branches do
                    return holds(expr.body) and holds(expr.orelse)
                key = self.key(expr)
                if key is not None:
                    if key in tagged:
                        return True
                    missed.append(key)
                    return False
                if returns and isinstance(expr, cst.Call):
                    if holds_all(expr, lambda v: v):
                        return True
                attribute = method_call(expr, *same_object) if same_object else None
                if attribute is not None:
                    expr = attribute.value
                    continue
                expr = through(expr) if through is not None else None
            return False

        def item(value: Any, i: int, n: int) -> cst.BaseExpression | None:
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == n
                and not any(isinstance(e, cst.StarredElement) for e in value.elements)
            ):
                return value.elements[i].value
            return None

        def unpacks(value: cst.BaseExpression, i: int, n: int) -> bool:
            if positional is not None and positional(value, i, n):
                return True
            return (
                returns
                and isinstance(value, cst.Call)
                and holds_all(value, lambda v: item(v, i, n))
            )

        # What may hold it: a variable's assigned values, its unpacked sources,
        # a parameter's arguments at each call of a local function.
        entries: list[tuple[Key, int, Any]] = [
            (key, _VALUES, values) for key, values in self.values.items()
        ]
        if returns or positional is not None:
            entries += [
                (key, _UNPACKED, sources) for key, sources in self.unpacked.items()
            ]
        for call in self.calls:
            target = self.callee(call)
            if target is None:
                continue
            function, bound = target
            for param_name, arg in bind_arguments(function, bound, call):
                key = self.function_scope_key(function, param_name)
                entries.append((key, _ARGUMENT, arg))

        def evaluate(entry: tuple[Key, int, Any]) -> bool:
            _, kind, payload = entry
            if kind == _VALUES:
                return any(holds(v) for v in payload)
            if kind == _UNPACKED:
                return any(unpacks(*s) for s in payload)
            return holds(payload)

        if not WORKLIST:
            changed = True
            while changed:
                changed = False
                for entry in entries:
                    if entry[0] not in tagged and evaluate(entry):
                        tagged.add(entry[0])
                        changed = True
            return tagged
        # A worklist: an entry found false is evaluated again only when a
        # variable its evaluation found untagged is tagged (all it read of
        # ``tagged``; the seeds, ``through`` and ``positional`` never read it).
        # ``holds`` only grows with ``tagged``, so this is the same least
        # fixpoint the rounds above reach.
        waiting: dict[Key, list[int]] = {}
        pending: list[int] = []
        queued = [False] * len(entries)

        def run(i: int) -> None:
            entry = entries[i]
            key = entry[0]
            if key in tagged:
                return
            missed.clear()
            if evaluate(entry):
                tagged.add(key)
                for j in waiting.pop(key, ()):
                    if not queued[j]:
                        queued[j] = True
                        pending.append(j)
            else:
                for variable in set(missed):
                    waiting.setdefault(variable, []).append(i)

        for i in range(len(entries)):
            run(i)
            while pending:
                j = pending.pop()
                queued[j] = False
                run(j)
        return tagged

    def flows_into(
        self, keys: set[Key], same_object: frozenset[str] = frozenset()
    ) -> set[Key]:
        """``keys`` and every variable whose value may reach them, through plain
        aliasing (``self.model = model``) and arguments of calls to local functions."""
        result = set(keys)

        def source(expr: cst.BaseExpression | None) -> Key | None:
            while expr is not None:
                key = self.key(expr)
                if key is not None:
                    return key
                attribute = method_call(expr, *same_object) if same_object else None
                expr = attribute.value if attribute is not None else None
            return None

        changed = True
        while changed:
            changed = False
            for key, values in self.values.items():
                if key in result:
                    for value in values:
                        origin = source(value)
                        if origin is not None and origin not in result:
                            result.add(origin)
                            changed = True
            for call in self.calls:
                target = self.callee(call)
                if target is None:
                    continue
                for param_name, arg in bind_arguments(target[0], target[1], call):
                    if self.function_scope_key(target[0], param_name) in result:
                        origin = source(arg)
                        if origin is not None and origin not in result:
                            result.add(origin)
                            changed = True
        return result

    def root_key(self, expr: cst.BaseExpression) -> Key | None:
        """The variable at the root of ``a.b.c`` (``a``), or ``self.a`` in a method."""
        while True:
            key = self.key(expr)
            if key is not None or not isinstance(expr, cst.Attribute):
                return key
            expr = expr.value

    def holds_tagged(self, expr: cst.BaseExpression, tagged: set[Key]) -> bool:
        key = self.key(expr)
        return key is not None and key in tagged
