"""The project view's reading of modules: a local import resolved to its file, and
the names a module defines and imports (``_Scan``), each file parsed once per view.
``ModuleScans`` is a base of ``ProjectView`` (``project_view``), which holds the
caches it fills (``_scans``, ``_trees``) and builds the facts from these scans.

Static only: files are parsed with ``ast``; nothing is imported, run or written.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .project_files import _MAX_FILE, _parse, _regular

#: A local target: (real path of the module file, name in it; "" for the module).
Target = tuple[str, str]
_IMPORT_LINE = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import\b|import[ \t]+([\w., \t]+))",
    re.MULTILINE,
)


@dataclass
class _Scan:
    """One parsed module: its imports (local name -> target) and definitions."""

    path: str
    tree: ast.Module | None
    names: dict[str, str | Target] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(
        default_factory=dict
    )
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)
    #: Does it call ``.backward()`` anywhere (a training file of the batch)?
    backward: bool = False


#: The runtime's package: known by its names, never read as a local helper.
_RUNTIME_PACKAGE = "accel_migrate"


class ModuleScans:
    """``ProjectView``'s reading of modules (a base of it)."""

    _scans: dict[tuple[str, tuple[str, ...]], _Scan]
    _trees: dict[str, ast.Module | None]

    def _module_file(self, dotted: str, bases: Iterable[str]) -> str | None:
        parts = dotted.split(".")
        if parts[0] == _RUNTIME_PACKAGE:
            return None
        for root in bases:
            stem = os.path.join(root, *parts)
            for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
                if os.path.isfile(candidate):
                    return os.path.realpath(candidate)
        return None

    def tree(self, path: str) -> ast.Module | None:
        """``path`` parsed with ``ast`` (once per view); None where it cannot be."""
        if path not in self._trees:
            self._trees[path] = _parse(path)
        return self._trees[path]

    def _scan(
        self, path: str, roots: tuple[str, ...], tree: ast.Module | None = None
    ) -> _Scan:
        """The names ``path`` defines and imports (of ``tree``, where given: a
        source that is not read from disk)."""
        key = (path, roots)
        if key in self._scans:
            return self._scans[key]
        scan = self._scans[key] = _Scan(path, tree or self.tree(path))
        if scan.tree is None:
            return scan
        for node in ast.walk(scan.tree):
            if isinstance(node, ast.Call):
                if (
                    isinstance(node.func, ast.Attribute)
                    and node.func.attr == "backward"
                ):
                    scan.backward = True
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        scan.names[alias.asname] = self._absolute(alias.name, roots)
                    else:
                        first = alias.name.split(".")[0]
                        scan.names[first] = self._absolute(first, roots)
            elif isinstance(node, ast.ImportFrom):
                module = self._from_module(path, node, roots)
                for alias in node.names:
                    if alias.name != "*":
                        scan.names[alias.asname or alias.name] = _attribute(
                            self, module, alias.name
                        )
                    elif isinstance(module, tuple) and not module[1]:
                        # a package's `from .layers import *`: its names re-exported
                        for name in self.public_names(module[0], roots) or ():
                            scan.names.setdefault(name, _attribute(self, module, name))
        for statement in _module_statements(scan.tree):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                scan.functions[statement.name] = statement
            elif isinstance(statement, ast.ClassDef):
                scan.classes[statement.name] = statement
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        scan.assigned.setdefault(target.id, []).append(statement.value)
        return scan

    def _absolute(self, dotted: str, roots: tuple[str, ...]) -> str | Target:
        found = self._module_file(dotted, roots)
        return (found, "") if found else dotted

    def _from_module(
        self, path: str, node: ast.ImportFrom, roots: tuple[str, ...]
    ) -> str | Target:
        if not node.level:
            return self._absolute(node.module or "", roots)
        folder = os.path.dirname(path)
        for _ in range(node.level - 1):
            folder = os.path.dirname(folder)
        if not node.module:
            init = os.path.join(folder, "__init__.py")
            return (os.path.realpath(init), "") if os.path.isfile(init) else "?"
        found = self._module_file(node.module, (folder,))
        return (found, "") if found else "?"

    def public_names(self, path: str, roots: tuple[str, ...]) -> tuple[str, ...] | None:
        """What ``from <module at path> import *`` binds: its ``__all__`` where that
        is a literal list or tuple of strings, else its top-level names that do not
        start with ``_``; None where that cannot be read (``__all__`` built at run
        time, a file that does not parse)."""
        scan = self._scan(path, roots)
        if scan.tree is None:
            return None
        listed = scan.assigned.get("__all__")
        if listed is not None:
            if len(listed) != 1 or not isinstance(listed[0], (ast.List, ast.Tuple)):
                return None
            names = [e.value for e in listed[0].elts if isinstance(e, ast.Constant)]
            if len(names) != len(listed[0].elts) or not all(
                isinstance(n, str) for n in names
            ):
                return None
            return tuple(names)  # type: ignore[arg-type]
        found = [*scan.functions, *scan.classes, *scan.assigned, *scan.names]
        return tuple(dict.fromkeys(n for n in found if not n.startswith("_")))

    def _may_import_local(self, path: str, roots: tuple[str, ...]) -> bool:
        """Does an import line of ``path`` name a relative or local module? (A
        text scan: a file that imports nothing local is not parsed.)"""
        if not _regular(path):
            return False  # a FIFO, a device: opening it could block forever
        try:
            with open(path, "rb") as handle:
                text = handle.read(_MAX_FILE)
        except OSError:
            return False
        for dots, module, names in _IMPORT_LINE.findall(text):
            if dots:
                return True
            heads = [module] if module else names.split(b",")
            for head in heads:
                first = head.strip().split(b".")[0].split()[0:1]
                if first and self._module_file(first[0].decode(), roots):
                    return True
        # `importlib.import_module('model.' + args.model)` (``dynamic_trainers``)
        return b"import_module(" in text

    def attribute(self, module: str | Target, name: str) -> str | Target:
        return _attribute(self, module, name)


def _module_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's top-level statements, with the assignments of its top-level
    ``if __name__ == "__main__":`` blocks (their names are the module's globals
    too, where the script runs)."""
    found: list[ast.stmt] = []
    for statement in tree.body:
        found.append(statement)
        test = statement.test if isinstance(statement, ast.If) else None
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
        ):
            found += [s for s in statement.body if isinstance(s, ast.Assign)]  # type: ignore[union-attr]
    return found


def _attribute(view: ModuleScans, module: str | Target, name: str) -> str | Target:
    """``module.name``: a submodule file, or a name of the module."""
    if isinstance(module, tuple):
        path, inner = module
        if inner:
            return (path, f"{inner}.{name}")
        if os.path.basename(path) == "__init__.py":
            # `from .Algorithm import Algorithm` in the package's __init__.py
            # rebinds the name its submodule import bound: the package's
            # `Algorithm` is the class (FeatureLearningRotNet's algorithms/)
            found = _reexport(view, path, name)
            if found is not None:
                return found
            sub = view._module_file(name, (os.path.dirname(path),))
            if sub:
                return (sub, "")
        return (path, name)
    return f"{module}.{name}" if module else name


def _reexport(view: ModuleScans, init: str, name: str) -> Target | None:
    """``name`` of a package that its ``__init__.py`` re-exports from one of its
    own modules (``from .ppo import PPO``): that module's ``name``."""
    tree = view.tree(init)
    if tree is None:
        return None
    for statement in tree.body:
        if not (
            isinstance(statement, ast.ImportFrom)
            and statement.level == 1
            and statement.module
        ):
            continue
        for alias in statement.names:
            if (alias.asname or alias.name) != name or alias.name == "*":
                continue
            module = view._module_file(statement.module, (os.path.dirname(init),))
            return (module, alias.name) if module else None
    return None
