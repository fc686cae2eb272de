"""``ScopeProvider``: scopes, bindings and qualified names in one walk of the tree,
the answers libcst's ``ScopeProvider`` gives to the questions the rules ask.

Why: the engine analyses the tree again after every rule that changes it, and
libcst's scopes were the largest part of each analysis (docs/performance.md: 23%
of a full pass over the benchmark tree). libcst computes them in two visits
(``ExpressionContextProvider``, then its scope visitor with an ABC ``isinstance``
per node and a qualified-name lookup at every call and subscript to find
``typing.cast`` and friends). Here one walk reads the node fields directly, knows
a name is stored from the field it sits in (an assignment's target, a ``for``
target...), and looks qualified names up at calls only when the walk has seen a
binding that could make one start with ``typing``.

What it answers, as libcst does (same algorithm, same order of bindings and
reads, so the same sets): ``scopes[node]`` for every node libcst's visitor
reaches; ``scope[name]`` (the bindings a read of ``name`` may see), ``scope.globals``,
``name in scope.assignments``, ``scope.node``, the ``FunctionScope`` / ``ClassScope``
/ ``ComprehensionScope`` kinds; a binding's ``.node``, ``.scope``, ``.name`` and
``.references`` (the reads, each with ``.node``); ``scope.get_qualified_names_for``.
Scopes are compared by identity (the ``(scope, name)`` variable keys), so one tree's
scopes are computed once per tree. ``tests/codemod/test_scopes.py`` compares
every answer with libcst's on tricky code and on every fixture.

``ACCEL_MIGRATE_LIBCST_SCOPES=1`` in the environment makes this module hand out
libcst's own provider and classes (for comparing outputs: ``bench/scope_parity.py``).
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Collection, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import BaseMetadataProvider, QualifiedName, QualifiedNameSource
from libcst.metadata import scope_provider as _libcst

_LOCAL, _IMPORT, _BUILTIN = (
    QualifiedNameSource.LOCAL,
    QualifiedNameSource.IMPORT,
    QualifiedNameSource.BUILTIN,
)


class Access:
    """A read of a name (``node``: the Name, or the dotted Attribute it starts)."""

    __slots__ = ("_index", "_name", "_referents", "node", "scope")

    def __init__(self, node: cst.CSTNode, scope: Scope) -> None:
        self.node = node
        self.scope = scope
        self._index = scope._assignment_count
        self._name = ""
        self._referents: list[BaseAssignment] | None = None

    def record_assignments(self, name: str) -> None:
        # Resolved when first asked (``referents``): the scopes are complete by
        # then, as they are when libcst resolves every read after its walk.
        self._name = name

    @property
    def referents(self) -> Collection[BaseAssignment]:
        """The bindings this read may see (libcst's ``Access.record_assignments``)."""
        if self._referents is None:
            scope, name = self.scope, self._name
            assignments = scope._resolve_scope_for_access(name, scope)
            previous = [
                a for a in assignments if a.scope is not scope or a._index < self._index
            ]
            if not previous and assignments and scope.parent is not scope:
                previous = list(scope.parent._resolve_scope_for_access(name, scope))
            self._referents = list(dict.fromkeys(previous))
        return self._referents


class BaseAssignment:
    __slots__ = ("_references", "name", "scope")
    _index = -1

    def __init__(self, name: str, scope: Scope) -> None:
        self.name = name
        self.scope = scope
        self._references: dict[Access, None] = {}

    @property
    def references(self) -> Collection[Access]:
        return self._references.keys()

    def record_accesses(self, accesses: dict[Access, None]) -> None:
        earlier: dict[Access, None] = {}
        for access in accesses:
            if access.scope is not self.scope or self._index < access._index:
                self._references[access] = None
            else:
                earlier[access] = None
        parent = self.scope.parent
        if earlier and parent is not self.scope:
            for shadowed in parent[self.name]:
                shadowed.record_accesses(earlier)

    def get_qualified_names_for(self, full_name: str) -> set[QualifiedName]:
        raise NotImplementedError


class BuiltinAssignment(BaseAssignment):
    __slots__ = ()

    def get_qualified_names_for(self, full_name: str) -> set[QualifiedName]:
        return {QualifiedName(f"builtins.{self.name}", _BUILTIN)}


class Assignment(BaseAssignment):
    __slots__ = ("_index", "node")

    def __init__(self, name: str, scope: Scope, node: cst.CSTNode, index: int) -> None:
        super().__init__(name, scope)
        self.node = node
        self._index = index  # type: ignore[misc]

    def get_qualified_names_for(self, full_name: str) -> set[QualifiedName]:
        prefix = self.scope._name_prefix
        return {QualifiedName(f"{prefix}.{full_name}" if prefix else full_name, _LOCAL)}


class ImportAssignment(Assignment):
    __slots__ = ("as_name",)

    def __init__(
        self,
        name: str,
        scope: Scope,
        node: cst.CSTNode,
        index: int,
        as_name: cst.CSTNode,
    ) -> None:
        super().__init__(name, scope, node, index)
        self.as_name = as_name

    def get_qualified_names_for(self, full_name: str) -> set[QualifiedName]:
        # libcst's ImportAssignment.get_qualified_names_for, step for step.
        node = self.node
        assert isinstance(node, (cst.Import, cst.ImportFrom))
        module = ""
        if isinstance(node, cst.ImportFrom):
            if node.module:
                module = get_full_name_for_node(node.module) or ""
            if node.relative:
                module = "." * len(node.relative) + module
        results: set[QualifiedName] = set()
        if isinstance(node.names, cst.ImportStar):
            return results
        for alias in node.names:
            real = get_full_name_for_node(alias.name)
            if not real:
                continue
            parts = real.split(".")
            for real_name in [".".join(parts[:i]) for i in range(len(parts), 0, -1)]:
                as_name = real_name
                if module and module.endswith("."):
                    real_name = f"{module}{real_name}"
                elif module:
                    real_name = f"{module}.{real_name}"
                if alias.asname:
                    evaluated = alias.evaluated_alias
                    if evaluated is not None:
                        as_name = evaluated
                if full_name.startswith(as_name):
                    rest = full_name.split(as_name, 1)[1]
                    if rest and not rest.startswith("."):
                        continue
                    rest = rest.lstrip(".")
                    results.add(
                        QualifiedName(
                            f"{real_name}.{rest}" if rest else real_name, _IMPORT
                        )
                    )
                    break
        return results


class Assignments:
    """``name in scope.assignments``, ``scope.assignments[name]``."""

    def __init__(self, assignments: dict[str, dict[BaseAssignment, None]]) -> None:
        self._assignments = assignments

    def __iter__(self) -> Iterator[BaseAssignment]:
        for found in self._assignments.values():
            yield from found

    def __getitem__(self, node: str | cst.CSTNode) -> set[BaseAssignment]:
        name = get_full_name_for_node(node)
        found = self._assignments.get(name) if name is not None else None
        return set(found) if found else set()

    def __contains__(self, node: str | cst.CSTNode) -> bool:
        return len(self[node]) > 0


class Scope:
    parent: Scope
    globals: GlobalScope
    node: cst.CSTNode | None = None
    _name_prefix = ""

    def __init__(self, parent: Scope) -> None:
        self.parent = parent
        self.globals = parent.globals
        self._assignments: dict[str, dict[BaseAssignment, None]] = {}
        self._assignment_count = 0
        self._accesses_by_node: dict[cst.CSTNode, list[Access]] = {}
        self._overwrites: dict[str, Scope] = {}

    # Hashed and compared by identity: ``object``'s own, in C (a Python
    # ``__hash__`` costs a call for every (scope, name) key of the module index).

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._name_prefix or '(module)'}>"

    # -- bindings ------------------------------------------------------------------
    def _find_assignment_target(self, name: str) -> Scope:
        overwrite = self._overwrites.get(name)
        if overwrite is not None:
            return self._next_visible_parent(self, overwrite)._find_assignment_target(
                name
            )
        return self

    def record_assignment(self, name: str, node: cst.CSTNode) -> None:
        target = self._find_assignment_target(name)
        found = target._assignments.setdefault(name, {})
        found[Assignment(name, target, node, target._assignment_count)] = None

    def record_import_assignment(
        self, name: str, node: cst.CSTNode, as_name: cst.CSTNode
    ) -> None:
        target = self._find_assignment_target(name)
        found = target._assignments.setdefault(name, {})
        index = target._assignment_count
        found[ImportAssignment(name, target, node, index, as_name)] = None

    def record_access(self, access: Access) -> None:
        self._accesses_by_node.setdefault(access.node, []).append(access)

    def _is_visible_from_children(self, from_scope: Scope) -> bool:
        return True

    def _next_visible_parent(
        self, from_scope: Scope, first: Scope | None = None
    ) -> Scope:
        parent = first if first is not None else self.parent
        while not parent._is_visible_from_children(from_scope):
            parent = parent.parent
        return parent

    def __contains__(self, name: str) -> bool:
        overwrite = self._overwrites.get(name)
        if overwrite is not None:
            return name in overwrite
        if name in self._assignments:
            return len(self._assignments[name]) > 0
        return name in self._next_visible_parent(self)

    def __getitem__(self, name: str) -> Collection[BaseAssignment]:
        return self._resolve_scope_for_access(name, self)

    def _resolve_scope_for_access(
        self, name: str, from_scope: Scope
    ) -> Collection[BaseAssignment]:
        overwrite = self._overwrites.get(name)
        if overwrite is not None:
            return self._next_visible_parent(
                from_scope, overwrite
            )._resolve_scope_for_access(name, from_scope)
        found = self._assignments.get(name)
        if found is not None:
            return found.keys()
        return self._next_visible_parent(from_scope)._resolve_scope_for_access(
            name, from_scope
        )

    @property
    def assignments(self) -> Assignments:
        return Assignments(self._assignments)

    # -- qualified names: libcst's Scope.get_qualified_names_for ---------------------
    def get_qualified_names_for(
        self, node: str | cst.CSTNode
    ) -> Collection[QualifiedName]:
        accesses = (
            self._accesses_by_node.get(node) if not isinstance(node, str) else None
        )
        if accesses:
            return {
                qname
                for access in accesses
                for referent in access.referents
                for qname in referent.get_qualified_names_for(referent.name)
            }
        full_name = get_full_name_for_node(node)
        if full_name is None:
            return set()
        assignments: Collection[BaseAssignment] = ()
        prefix: str | None = full_name
        while prefix:
            if prefix in self:
                assignments = self[prefix]
                break
            idx = prefix.rfind(".")
            prefix = None if idx == -1 else prefix[:idx]
        if not isinstance(node, str):
            for assignment in assignments:
                if isinstance(assignment, Assignment) and _libcst._is_assignment(
                    node, assignment.node
                ):
                    return assignment.get_qualified_names_for(full_name)
        results: set[QualifiedName] = set()
        for assignment in assignments:
            results |= assignment.get_qualified_names_for(full_name)
        return results


class BuiltinScope(Scope):
    def __init__(self, globals: GlobalScope) -> None:
        self.globals = globals  # type: ignore[assignment]
        self.parent = self
        self._assignments = {}
        self._assignment_count = 0
        self._accesses_by_node = {}
        self._overwrites = {}

    def __contains__(self, name: str) -> bool:
        return hasattr(builtins, name)

    def _resolve_scope_for_access(
        self, name: str, from_scope: Scope
    ) -> Collection[BaseAssignment]:
        found = self._assignments.get(name)
        if found is None:
            if not hasattr(builtins, name):
                return ()
            found = self._assignments[name] = {BuiltinAssignment(name, self): None}
        return found.keys()


class GlobalScope(Scope):
    def __init__(self) -> None:
        self.globals = self
        super().__init__(BuiltinScope(self))
        self.globals = self


class LocalScope(Scope):
    def __init__(self, parent: Scope, node: cst.CSTNode, name: str | None) -> None:
        super().__init__(parent)
        self.name = name
        self.node = node
        self._name_prefix = self._make_name_prefix()

    def _make_name_prefix(self) -> str:
        return ".".join(filter(None, [self.parent._name_prefix, self.name, "<locals>"]))


class FunctionScope(LocalScope):
    pass


class ClassScope(LocalScope):
    def _is_visible_from_children(self, from_scope: Scope) -> bool:
        return from_scope.parent is self and isinstance(from_scope, AnnotationScope)

    def _make_name_prefix(self) -> str:
        return ".".join(filter(None, [self.parent._name_prefix, self.name]))


class ComprehensionScope(LocalScope):
    def _make_name_prefix(self) -> str:
        return ".".join(filter(None, [self.parent._name_prefix, "<comprehension>"]))


class AnnotationScope(LocalScope):
    def _make_name_prefix(self) -> str:
        return self.parent._name_prefix


class ScopeProvider(BaseMetadataProvider[Scope | None]):
    """Every node's scope (``MetadataWrapper.resolve(ScopeProvider)``)."""

    def _gen(self, wrapper: Any) -> Mapping[cst.CSTNode, Scope | None]:
        # libcst's _gen, without its copy of the mapping (a new one per tree).
        from .scope_walk import ScopeWalk

        computed: dict[cst.CSTNode, Scope | None] = {}
        ScopeWalk(computed).run(wrapper.module)
        return MappingProxyType(computed)


if os.environ.get("ACCEL_MIGRATE_LIBCST_SCOPES") == "1":  # pragma: no cover
    from libcst.metadata import (
        Assignment,
        ClassScope,
        ComprehensionScope,
        FunctionScope,
        GlobalScope,
        ImportAssignment,
        ScopeProvider,
    )

__all__ = [
    "Access",
    "Assignment",
    "BuiltinAssignment",
    "ClassScope",
    "ComprehensionScope",
    "FunctionScope",
    "GlobalScope",
    "ImportAssignment",
    "Scope",
    "ScopeProvider",
]
