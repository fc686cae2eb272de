"""Compare ``codemod.scopes`` with libcst's ``ScopeProvider`` on one module: every
answer the rules and the analysis ask of a scope (see ``codemod/scopes.py``).
Returns the differences as lines (empty: the same answers)."""

from __future__ import annotations

from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper
from libcst.metadata import ScopeProvider as LibcstScopes

from accel_migrate.codemod import scopes as own
from accel_migrate.codemod.parents import ParentProvider


def _binding(binding: Any, scope_id: Any) -> tuple[str, int, Any]:
    kind = type(binding).__name__
    return (kind, id(getattr(binding, "node", None)), scope_id(binding.scope))


def differences(module: cst.Module) -> list[str]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    # Only this tree's nodes: a string read as an annotation is parsed by each
    # side into nodes of its own.
    tree = {*wrapper.resolve(ParentProvider), module}
    theirs = {n: s for n, s in wrapper.resolve(LibcstScopes).items() if n in tree}
    ours = {n: s for n, s in wrapper.resolve(own.ScopeProvider).items() if n in tree}
    found: list[str] = []
    if set(map(id, theirs)) != set(map(id, ours)):
        only_theirs = [type(n).__name__ for n in theirs if n not in ours][:5]
        only_ours = [type(n).__name__ for n in ours if n not in theirs][:5]
        found.append(f"nodes: libcst only {only_theirs}, ours only {only_ours}")
        return found

    # Scopes correspond one to one: the same kind, node and name prefix.
    pairs: dict[int, Any] = {}

    def their_id(scope: Any) -> Any:
        return (type(scope).__name__, id(getattr(scope, "node", None)))

    def our_id(scope: Any) -> Any:
        return (type(scope).__name__, id(getattr(scope, "node", None)))

    for node, scope in theirs.items():
        mine = ours[node]
        if (scope is None) != (mine is None):
            found.append(f"{type(node).__name__}: scope {scope} / {mine}")
            continue
        if scope is None:
            continue
        if their_id(scope) != our_id(mine) or scope._name_prefix != mine._name_prefix:
            found.append(
                f"{type(node).__name__}: scope {their_id(scope)} / {our_id(mine)}"
            )
            continue
        if pairs.setdefault(id(mine), scope) is not scope:
            found.append(f"{type(node).__name__}: two libcst scopes for one of ours")
        if (scope.globals is scope) != (mine.globals is mine):
            found.append("globals differ")
        q_theirs = {(q.name, q.source) for q in scope.get_qualified_names_for(node)}
        q_ours = {(q.name, q.source) for q in mine.get_qualified_names_for(node)}
        if q_theirs != q_ours:
            found.append(
                f"{type(node).__name__} {cst.Module([]).code_for_node(node)[:40]!r}:"
                f" qualified names {sorted(q_theirs)} / {sorted(q_ours)}"
            )
        if isinstance(node, cst.Name):
            name = node.value
            b_theirs = {_binding(b, their_id) for b in scope[name]}
            b_ours = {_binding(b, our_id) for b in mine[name]}
            if b_theirs != b_ours:
                found.append(f"Name {name!r}: bindings {b_theirs} / {b_ours}")
            if (name in scope.assignments) != (name in mine.assignments):
                found.append(f"Name {name!r}: in assignments differs")
            for b_t in scope[name]:
                refs_t = sorted(id(a.node) for a in b_t.references)
                for b_o in mine[name]:
                    if id(getattr(b_o, "node", None)) == id(getattr(b_t, "node", 0)):
                        refs_o = sorted(id(a.node) for a in b_o.references)
                        if refs_t != refs_o:
                            found.append(f"Name {name!r}: references differ")
    # Every scope's own bindings.
    for mine_id, scope in pairs.items():
        mine = next(s for s in ours.values() if id(s) == mine_id)
        names_t = {n for n, a in scope._assignments.items() if a}
        names_o = {n for n, a in mine._assignments.items() if a}
        if names_t != names_o:
            found.append(f"{scope}: assignments {sorted(names_t ^ names_o)}")
    return found
