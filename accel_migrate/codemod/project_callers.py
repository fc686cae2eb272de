"""Who calls a batch file's functions from the batch's other files (the project
view's reverse direction), and what each call hands them.

In batch mode (``accel-migrate train.py engine.py``, or a folder) a helper
module learns its callers: ``engine.train_one_epoch(model, optimizer,
train_loader, epoch)`` in ``train.py`` tells ``engine.py`` that its ``model``
parameter receives a model ``train.py`` builds, ``optimizer`` an optimizer and
``loader`` a DataLoader. Each argument is classified in the caller's file as a
helper's return is (``HelperFacts.kind_of``: through the caller's variables,
``.to()``/``.cuda()``, conditional expressions and its own local imports).

Computed once per view (``ProjectView.callers_of``), over the files of the
batch only: a single file argument has no callers (its importers are not
read). Static only: ``ast``; nothing is imported or run.

``given_by_callers`` is the migrating file's side: which of its functions'
parameters every batch call hands a model (the caller prepares it: AM004 need
not) or a loader (the caller shards it: its loops are loader loops, and what is
summed over them is reduced here).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst

from .project_facts import CallSite

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex
    from .project_view import ProjectView, Target


def batch_callers(view: ProjectView) -> dict[Target, tuple[CallSite, ...]]:
    """Every call from one batch file to a top-level function of another, by
    the callee (its file's real path, its name)."""
    from .project_helpers import HelperFacts
    from .project_view import _parse, roots_of

    found: dict[Target, list[CallSite]] = {}
    for caller in sorted(view.scripts):
        roots = roots_of(caller, view.base)
        if not view._may_import_local(caller, roots):
            continue  # a text scan: most files of a batch import nothing local
        tree = _parse(caller)
        if tree is None:
            continue
        reader = HelperFacts(view, (caller, ""), roots, caller, 0)
        for function, call in _calls(tree):
            target = reader.resolve(call.func)
            if (
                not isinstance(target, tuple)
                or not target[1]
                or "." in target[1]  # a method: its instance is not followed
                or target[0] == caller
                or target[0] not in view.scripts
            ):
                continue
            callee = view._scan(target[0], roots).functions.get(target[1])
            if callee is None:
                continue
            kinds = tuple(
                (name, reader.kind_of(arg, function, 0)[0])
                for name, arg in _bind(callee, call)
            )
            found.setdefault(target, []).append(
                CallSite(view._display(caller, target[0]), call.lineno, kinds)
            )
    return {target: tuple(sites) for target, sites in found.items()}


def _calls(tree: ast.Module) -> list[tuple[ast.AST, ast.Call]]:
    """Each call of the module with the function it is in (the module itself at
    top level)."""
    found: list[tuple[ast.AST, ast.Call]] = []
    todo: list[tuple[ast.AST, ast.AST]] = [(tree, tree)]
    while todo:
        owner, node = todo.pop()
        for child in ast.iter_child_nodes(node):
            inner = (
                child
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                else owner
            )
            if isinstance(child, ast.Call):
                found.append((inner, child))
            todo.append((inner, child))
    return found


def _bind(
    function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call
) -> list[tuple[str, ast.expr]]:
    """The parameters a call binds by position and keyword (none of ``*args``/
    ``**kwargs`` on either side: those are not followed)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return []
    positional = [*function.args.posonlyargs, *function.args.args]
    bound = [(p.arg, a) for p, a in zip(positional, call.args, strict=False)]
    names = {p.arg for p in [*positional, *function.args.kwonlyargs]}
    bound += [(k.arg, k.value) for k in call.keywords if k.arg in names]  # type: ignore[misc]
    return bound


def given_by_callers(
    index: ModuleIndex, kind: str
) -> dict[Key, tuple[cst.Param, tuple[CallSite, ...]]]:
    """Parameters of this file's top-level functions that every call from the
    batch's other files (``ProjectFacts.callers``, at least one) hands a value of
    ``kind`` ("model", "loader"), with the calls. A function this file calls
    itself is left out: its own arguments decide (``ModuleIndex.arguments``)."""
    found: dict[Key, tuple[cst.Param, tuple[CallSite, ...]]] = {}
    if not index.project.callers:
        return found
    for statement in index.module.body:
        if not isinstance(statement, cst.FunctionDef):
            continue
        sites = index.project.callers_of(statement.name.value)
        if not sites or index.call_sites(statement):
            continue
        params = statement.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            name = param.name.value
            if all(site.kind(name) == kind for site in sites):
                key = index.function_scope_key(statement, name)
                found[key] = (param, sites)
    return found
