"""What sets each variable of a module, for the provenance of the divergence
analysis's facts (``rank_local_sources``): assignments, loop targets, mutating
calls, arguments at call sites, parameter defaults, and the defaults of
rank-local command-line options a namespace is parsed with."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .in_place_changes import call_change, deleted_items
from .index_syntax import _all_params, assigned_targets
from .parsed_namespaces import handed_on
from .rank_local_syntax import _targets
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key
    from .rank_local_sources import RankLocalSources

#: (kind, the node to follow or to name, the node that binds the variable)
_Definition = tuple[str, cst.CSTNode, cst.CSTNode]


def collect_definitions(sources: RankLocalSources) -> dict[Key, list[_Definition]]:
    """``RankLocalSources.definitions``: what sets each variable (and attribute
    of one), with the node that binds it."""
    index = sources.index
    found: dict[Key, list[_Definition]] = {}

    def add(
        target: cst.CSTNode, kind: str, node: cst.CSTNode, anchor: cst.CSTNode
    ) -> None:
        for leaf in _targets(target):
            key = sources._key(leaf)
            if key is not None:
                found.setdefault(key, []).append((kind, node, anchor))

    module = index.module
    for statement in findall(module, m.Assign() | m.AnnAssign() | m.AugAssign()):
        value = getattr(statement, "value", None)
        targets = assigned_targets(statement)
        for target in targets:
            if value is not None:
                add(target, "value", value, statement)
            if isinstance(target, cst.Subscript) and value is not None:
                add(target.value, "value", value, statement)  # `counts[i] = v`
            for condition in sources._conditions(statement):
                add(target, *condition, statement)
                if isinstance(target, cst.Subscript):
                    # `seen[k] = 1` where only some processes go: its keys
                    add(target.value, *condition, statement)
    options = index.rank_local_options.options
    assignments = findall(module, m.Assign() | m.AnnAssign()) if options else ()
    for statement in assignments:
        namespace = index.rank_local_options.namespace(statement)
        base = sources._key(namespace) if namespace is not None else None
        if base is None:
            continue
        for dest, parsed in options.items():
            key = (base[0], f"{base[1]}.{dest}")
            for option in parsed:
                found.setdefault(key, []).append(("option", option.default, statement))
    if index.rank_local_options.attributes:
        for key, definition in handed_on(index):
            found.setdefault(key, []).append(definition)
    for loop in index.for_loops:
        over_loader, counter = index.loader_loop(loop.iter)
        target = loop.target
        if over_loader and counter and isinstance(target, cst.Tuple):
            # The divergence analysis's fact: `i` of `enumerate(loader)` is
            # the step index, the same on every process.
            add(target.elements[0].value, "counter", loop.iter, loop)
            for element in target.elements[1:]:
                add(element.value, "data", loop.iter, loop)
        elif over_loader:
            add(target, "data", loop.iter, loop)
        else:
            add(target, "value", loop.iter, loop)
    for comp in findall(module, m.CompFor()):
        add(comp.target, "value", comp.iter, comp)  # type: ignore[attr-defined]
    for call in index.calls:
        # grown, shrunk or written in place (`in_place_changes`): by its
        # arguments, and under the tests of the branches around
        change = call_change(index, call)
        if change is None:
            continue
        receiver, arguments = change
        for argument in arguments:
            add(receiver, "value", argument, call)
        for condition in sources._conditions(call):
            add(receiver, *condition, call)
    for statement in findall(module, m.Del()):
        assert isinstance(statement, cst.Del)
        for receiver, chosen in deleted_items(statement):  # `del d[k]`
            for part in chosen:
                add(receiver, "value", part, statement)
            for condition in sources._conditions(statement):
                add(receiver, *condition, statement)
    for function in index.functions:
        for call in index.call_sites(function):
            for key, arg in index.arguments(call):
                found.setdefault(key, []).append(("value", arg, function))
        for param in _all_params(function.params):  # `def f(rank=int(os.environ[...]))`
            key = index.function_scope_key(function, param.name.value)
            if param.default is not None:
                found.setdefault(key, []).append(("value", param.default, function))
    return found
