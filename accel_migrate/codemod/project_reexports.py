"""Names a local module re-exports from a library: ``dataloader.py`` does
``from torch.utils.data import DataLoader`` and the script does ``from dataloader
import *`` (or ``from dataloader import DataLoader``, or ``import dataloader``
then ``dataloader.DataLoader``). Python binds the script's name to torch's
class; libcst names it ``dataloader.DataLoader`` (or nothing, for a star
import). The project view records ``dataloader.DataLoader`` (``<star>.DataLoader``
for a star import) -> ``torch.utils.data.DataLoader`` in ``ProjectFacts.reexports``
and ``LazyQualifiedNames`` adds the library's name, so that the rules see the
DataLoader they would see had the script imported it itself.

Only a name the module binds exactly once, by an import at its top level, is
followed (through at most ``_DEPTH`` local modules): a name also assigned,
defined, imported in a function or under a condition may be something else at
run time, and is not taken for the library's. Static only: modules are parsed
with ``ast``, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .project_scans import ModuleScans, Target

_DEPTH = 4
#: The prefix of the names a local star import binds (``project_view.STAR``).
STAR = "<star>"


def library_name(
    view: ModuleScans, target: object, roots: tuple[str, ...], depth: int = _DEPTH
) -> str | None:
    """The qualified name of the library object that local ``target`` (a module
    file and a top-level name in it) is bound to, or None where that is not
    certain."""
    from .project_scans import _attribute

    if not (isinstance(target, tuple) and target[1] and "." not in target[1]):
        return None
    path, name = target
    tree = view.tree(path)
    if tree is None or depth <= 0:
        return None
    binding = _only_import(tree, name)
    if binding is None:
        return None
    statement, alias = binding
    if isinstance(statement, ast.Import):
        found = view._absolute(alias.name, roots)
        # `import torch.utils.data as data` binds the module; `import torch`, torch
        real = alias.name if alias.asname else alias.name.split(".")[0]
        return real if isinstance(found, str) and found == alias.name else None
    module = view._from_module(path, statement, roots)
    if isinstance(module, str):
        return f"{module}.{alias.name}" if module and module != "?" else None
    return library_name(view, _attribute(view, module, alias.name), roots, depth - 1)


def module_reexports(
    view: ModuleScans, path: str, roots: tuple[str, ...]
) -> dict[str, str]:
    """Every top-level name of the local module at ``path`` that is a library's
    object, with that object's qualified name."""
    tree = view.tree(path)
    if tree is None:
        return {}
    found: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                bound = alias.asname or alias.name.split(".")[0]
                if alias.name == "*" or bound in found:
                    continue
                name = library_name(view, (path, bound), roots)
                if name is not None:
                    found[bound] = name
    return found


def _only_import(
    tree: ast.Module, name: str
) -> tuple[ast.Import | ast.ImportFrom, ast.alias] | None:
    """The one statement binding ``name`` in the module, where it is an import at
    the top level; None where the name has any other binding."""
    found: list[tuple[ast.stmt, ast.alias | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    found.append((node, None))  # may bind it
                elif (alias.asname or alias.name.split(".")[0]) == name:
                    found.append((node, alias))
        elif isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ) and (node.name == name):
            found.append((node, None))
        elif isinstance(node, ast.Name) and node.id == name:
            if not isinstance(node.ctx, ast.Load):
                found.append((ast.Pass(), None))
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            found.append((node, None))
        elif isinstance(node, ast.arg) and node.arg == name:
            found.append((ast.Pass(), None))
        elif isinstance(node, ast.ExceptHandler) and node.name == name:
            found.append((node, None))
    if len(found) != 1:
        return None
    statement, alias = found[0]
    if alias is None or statement not in tree.body:
        return None
    assert isinstance(statement, (ast.Import, ast.ImportFrom))
    return statement, alias


def reexported(
    view: ModuleScans,
    prefix: str,
    target: str | Target,
    roots: tuple[str, ...],
    out: dict[str, str],
    star: bool = False,
) -> None:
    """Record in ``out`` what a script's import of local ``target`` as ``prefix``
    binds to a library's object: the name itself (``from dataloader import
    DataLoader``), or the module's names (``import dataloader``; a star import,
    ``prefix`` ``<star>``: its public names). A name two star imports bind to
    different objects maps to "" (not known)."""
    if not isinstance(target, tuple):
        return
    if target[1]:
        name = library_name(view, target, roots)
        if name is not None:
            out[prefix] = name
        return
    names = module_reexports(view, target[0], roots)
    bound_names = (view.public_names(target[0], roots) or ()) if star else names
    for bound in bound_names:
        key = f"{prefix}.{bound}"
        name = names.get(bound, "")
        out[key] = name if out.get(key, name) == name else ""


def with_library_names(
    reexports: Mapping[str, str], node: Any, scope: Any, found: Any
) -> Any:
    """libcst's qualified names ``found`` of ``node`` (in ``scope``), with the
    library's name of each that a local module re-exports; a bare name that no
    binding of the file defines, with the one a local star import binds."""
    from libcst import Name
    from libcst.metadata import QualifiedName, QualifiedNameSource

    names = [q.name for q in found]
    if not names and isinstance(node, Name) and not scope[node.value]:
        names = [f"{STAR}.{node.value}"]
    extra = {reexports[n] for n in names if n in reexports}
    if not extra:
        return found
    return {
        *found,
        *(QualifiedName(n, QualifiedNameSource.IMPORT) for n in extra),
    }
