"""The functions and classes a module defines, as the index sees them: its
local subclasses of a base, the class or function a name (or ``self.x``, or an
instance's attribute) calls, each local function's call sites, and the
parameters a call binds."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import cached_property

import libcst as cst

from .index_syntax import Key, _method, bind_arguments
from .instance_classes import instance_class
from .parameterless_modules import parameterless_class


class LocalDefinitions:
    """A part of ``ModuleIndex`` (``analysis``): its methods read the index's
    classes, calls and scopes."""

    # -- local classes ------------------------------------------------------------------
    def local_subclasses(self, base_prefixes: Iterable[str]) -> set[cst.ClassDef]:
        """Classes of this module deriving, directly or through each other, from a base
        whose qualified name starts with one of ``base_prefixes``."""
        prefixes = tuple(base_prefixes)
        return self.local_subclasses_where(lambda name: name.startswith(prefixes))

    def local_subclasses_where(
        self, passes: Callable[[str], bool]
    ) -> set[cst.ClassDef]:
        """Classes of this module deriving, directly or through each other, from a base
        whose qualified name ``passes`` (``names.is_optimizer_base``: the
        library's concrete optimizers too, which no prefix singles out)."""
        found: set[cst.ClassDef] = set()
        changed = True
        while changed:
            changed = False
            for cls in self.classes:
                if cls in found:
                    continue
                for base in cls.bases:
                    names = self.qualnames(base.value)
                    local = self.local_class(base.value)
                    if any(passes(n) for n in names) or local in found:
                        found.add(cls)
                        changed = True
                        break
        return found

    @cached_property
    def parameterless_classes(self) -> frozenset[cst.ClassDef]:
        """Classes of this file that hold no parameter (``parameterless_modules``)."""
        return frozenset(c for c in self.classes if parameterless_class(self, c))

    def local_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        if not isinstance(node, cst.Name):
            return None
        scope = self._scopes.get(node)
        if scope is None:
            return None
        for assignment in scope[node.value]:
            if isinstance(getattr(assignment, "node", None), cst.ClassDef):
                return assignment.node  # type: ignore[return-value]
        return None

    def local_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        if isinstance(node, cst.Name):
            scope = self._scopes.get(node)
            if scope is None:
                return None
            for assignment in scope[node.value]:
                if isinstance(getattr(assignment, "node", None), cst.FunctionDef):
                    return assignment.node  # type: ignore[return-value]
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
        ):
            cls = self.enclosing_class(node)
            if cls is not None:
                return _method(cls, node.attr.value)
        if isinstance(node, cst.Attribute):
            # `Trainer().fit(loader)`, `trainer = Trainer(cfg); trainer.fit(loader)`
            cls = instance_class(self, node.value)
            if cls is not None:
                return _method(cls, node.attr.value)
        return None

    def callee(self, call: cst.Call) -> tuple[cst.FunctionDef, int] | None:
        """The local function a call runs, and how many leading parameters it binds
        itself (1 for ``self``)."""
        # Asked tens of thousands of times a pass (call_sites, arguments, the
        # divergence analysis): each call's answer is kept with this tree's index.
        try:
            return self._callees[call]
        except KeyError:
            found = self._callees[call] = self._find_callee(call)
            return found

    def _find_callee(self, call: cst.Call) -> tuple[cst.FunctionDef, int] | None:
        function = self.local_function(call.func)
        if function is not None:
            bound = 1 if isinstance(call.func, cst.Attribute) else 0
            return function, bound
        cls = self.local_class(call.func)
        if cls is not None:
            init = _method(cls, "__init__")
            if init is not None:
                return init, 1
        return None

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call]:
        return list(self._call_sites.get(function, ()))

    @cached_property
    def _call_sites(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        """Each local function's calls in this tree, in the tree's order."""
        sites: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.calls:
            found = self.callee(call)
            if found is not None:
                sites.setdefault(found[0], []).append(call)
        return sites

    def arguments(self, call: cst.Call) -> Iterator[tuple[Key, cst.BaseExpression]]:
        """The parameters of the local function a call runs, and what it passes them."""
        target = self.callee(call)
        if target is None:
            return
        function, bound = target
        for param_name, arg in bind_arguments(function, bound, call):
            yield self.function_scope_key(function, param_name), arg
