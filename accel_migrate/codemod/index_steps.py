"""Training steps as the index sees them: backward calls, the loops around a node,
loops that read a loader or no data."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from .index_syntax import (
    _MAX_PATHS,
    _calls_run_by,
    _nodes_run_by,
    attr_chain,
)


class TrainingSteps:
    """A part of ``ModuleIndex`` (``analysis``): its methods read the index's
    tree, scopes and variables."""

    # -- training steps ----------------------------------------------------------------------
    def is_backward_call(self, node: cst.CSTNode) -> bool:
        """``loss.backward(...)`` on a tensor, or ``accel.backward(loss, ...)`` (not a
        user object's own ``backward``: ``self.backward()``, ``super().backward()``,
        or a call inside a method named ``backward``)."""
        if not isinstance(node, cst.Call):
            return False
        if self.is_runtime_call(node, "backward"):
            return True
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
            return False
        receiver = func.value
        if isinstance(receiver, cst.Name) and receiver.value in {"self", "cls"}:
            return False
        if isinstance(receiver, cst.Call) and attr_chain(receiver.func) == "super":
            return False
        function = self.enclosing_function(node)
        return function is None or function.name.value != "backward"

    def runs_backward(self, node: cst.CSTNode) -> bool:
        """Does running ``node`` call a backward, directly or through local functions?"""
        return self._runs_backward(node, set())

    def _runs_backward(self, node: cst.CSTNode, seen: set[cst.FunctionDef]) -> bool:
        cached = self._backward_cache.get(node)
        if cached is not None:
            return cached
        found = False
        for call in _calls_run_by(node):
            if self.is_backward_call(call):
                found = True
                break
            target = self.callee(call)
            if target is not None and target[0] not in seen:
                seen.add(target[0])
                if self._runs_backward(target[0].body, seen):
                    found = True
                    break
        self._backward_cache[node] = found
        return found

    @cached_property
    def _backward_cache(self) -> dict[cst.CSTNode, bool]:
        return {}

    def loop_paths(self, node: cst.CSTNode) -> list[tuple[cst.For | cst.While, ...]]:
        """The chains of loops that run ``node``, innermost first: the loops around
        it in its function, then around each call of that function, and so on
        (each chain ends at module level or at a function nothing here calls)."""
        return self._loop_paths(node, frozenset())[:_MAX_PATHS]

    def _loop_paths(
        self, node: cst.CSTNode, seen: frozenset[cst.FunctionDef]
    ) -> list[tuple[cst.For | cst.While, ...]]:
        loops: list[cst.For | cst.While] = []
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
                loops.append(ancestor)
            if isinstance(ancestor, cst.FunctionDef):
                sites = self.call_sites(ancestor) if ancestor not in seen else []
                if not sites:
                    return [tuple(loops)]
                paths = []
                for site in sites:
                    for path in self._loop_paths(site, seen | {ancestor}):
                        paths.append((*loops, *path))
                        if len(paths) >= _MAX_PATHS:
                            return paths
                return paths
            child = ancestor
        return [tuple(loops)]

    def reads_loader(self, loop: cst.For | cst.While) -> bool:
        """Does each turn of ``loop`` take its data from a data loader: a ``for`` over
        one (or over a local generator that loops over one), or ``next(it)`` on a
        loader's iterator in its body?"""
        if isinstance(loop, cst.For):
            if self.loader_loop(loop.iter)[0]:
                return True
            if isinstance(loop.iter, cst.Call):
                target = self.callee(loop.iter)
                if target is not None and any(
                    isinstance(inner, cst.For) and self.loader_loop(inner.iter)[0]
                    for inner in _nodes_run_by(target[0].body)
                ):
                    return True
        for call in _calls_run_by(loop.body):
            if "builtins.next" in self.qualnames(call.func) and call.args:
                source = call.args[0].value
                if self.loader_loop(source)[0]:
                    return True
        return False

    def reads_no_data(self, loop: cst.For | cst.While) -> bool:
        """Is ``loop`` provably not stepping through a data source: a ``for`` over
        ``range(...)``, ``itertools.count()`` or a literal list (through
        ``enumerate``/``tqdm``), or a ``while``, that calls no ``next(...)``
        (MTAN's ``for k in range(train_batch): ... = next(train_dataset)`` over
        ``iter(train_loader)`` reads a loader)?"""
        if any(
            "builtins.next" in self.qualnames(call.func)
            for call in _calls_run_by(loop.body)
        ):
            return False
        return isinstance(loop, cst.While) or self._no_data(loop.iter, 0)

    def _no_data(self, iterable: cst.BaseExpression, depth: int) -> bool:
        if depth > 3:
            return False
        if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)):
            return True
        if isinstance(iterable, cst.Call):
            names = self.qualnames(iterable.func)
            if names & {"builtins.range", "itertools.count", "itertools.repeat"}:
                return True
            inner = self._loop_wrapped(iterable)
            if inner is not None:
                return self._no_data(inner, depth + 1)
            return False
        key = self.key(iterable) if isinstance(iterable, cst.Name) else None
        values = self.values.get(key, []) if key is not None else []
        return bool(values) and all(
            v is not None and self._no_data(v, depth + 1) for v in values
        )
