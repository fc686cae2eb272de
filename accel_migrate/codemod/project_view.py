"""The project view: local imports resolved to files, and the facts of what they
define (``project_facts``), built once per run.

An import is local when the module is a file under the importing script's
roots: its own folder (Python's ``sys.path[0]``), the folder above its package,
in a batch each folder above it up to the batch's common folder, and each
folder above it up to its project root: the nearest folder above it with a
``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``, below the home
folder (``pip install -e .`` or running from that folder puts it on
``sys.path``: minGPT's
``projects/adder/adder.py`` imports ``mingpt`` from the root). Those files are
read, never written; a fact names the file it came from, relative to the
project root when it lies outside the script's folder. The runtime's own
package (``accel_migrate``) is never a local module, even inside its repository.
``import utils``, ``from models import get_network`` (a package's
``__init__.py`` and what it re-exports), ``from mingpt.trainer import Trainer``
and relative imports are followed; a name's facts follow calls into other local
modules (``get_network`` -> ``models.vgg.vgg16_bn`` -> ``class VGG(nn.Module)``).

Static only: files are parsed with ``ast``; nothing is imported, run or written.
Each file is parsed once per view (the batch builds one view for all its files).
The roots and the reading of files are ``project_files``'; resolving an import to
its file and what a module defines, ``project_scans``'; which helper modules of a
batch are migrated for its calls, ``project_libraries``'.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace

from .project_facts import CallSite, HelperFact
from .project_file_facts import ProjectFacts
from .project_files import ROOT_MARKERS, project_root, roots_of
from .project_libraries import BatchLibraries
from .project_namespaces import HandedOption
from .project_reexports import reexported as _reexported
from .project_scans import ModuleScans, Target, _attribute, _Scan

_DEPTH = 12
#: At most this many local modules are read for device code; past it, a script
#: is not taken for device-free.
_MAX_DEVICE_WALK = 200
#: The prefix of the names a local star import binds (``ProjectFacts`` keys).
STAR = "<star>"


__all__ = [
    "ROOT_MARKERS",
    "STAR",
    "ProjectView",
    "Target",
    "project_root",
    "read_project",
    "roots_of",
]


class ProjectView(ModuleScans, BatchLibraries):
    """Local modules and their facts, for the scripts of one run."""

    def __init__(self, scripts: Sequence[str] = (), display_base: str = "") -> None:
        reals = [os.path.realpath(s) for s in scripts]
        #: The files this run migrates (a class of one trains in its own file).
        self.scripts = frozenset(reals)
        folders = [os.path.dirname(r) for r in reals]
        self.base = os.path.commonpath(folders) if len(folders) > 1 else ""
        self.display_base = display_base
        self._scans: dict[tuple[str, tuple[str, ...]], _Scan] = {}
        self._facts: dict[tuple[Target, tuple[str, ...]], HelperFact | None] = {}
        self._callers: dict[Target, tuple[CallSite, ...]] | None = None
        self._trees: dict[str, ast.Module | None] = {}
        self._library: dict[str, bool] = {}
        #: The facts being read now (``_fact``): one asked again reads "not
        #: known", so what is decided from it then is not kept (``migrated_library``).
        self._pending: set[tuple[Target, tuple[str, ...]]] = set()
        #: The text of the project's Python files, by topmost root
        #: (``uncalled_methods``): read only for a class that prints or writes.
        self._project_texts: dict[str, tuple[bytes, ...] | None] = {}
        #: The rank-local options of a file's parsers (``project_namespaces``).
        self._rank_options: dict[tuple[object, ...], tuple[HandedOption, ...]] = {}

    # -- files -------------------------------------------------------------------
    def _display(self, path: str, script: str) -> str:
        base = self.display_base or self.base or os.path.dirname(script)
        try:
            shown = os.path.relpath(path, base)
            if shown.startswith(".."):
                # read from the project root (an editable install's package)
                root = project_root(os.path.dirname(os.path.realpath(script)))
                shown = os.path.relpath(path, root) if root else shown
        except ValueError:
            return path
        return path if shown.startswith("..") else shown

    # -- facts of one file --------------------------------------------------------
    def facts_for(self, script: str) -> ProjectFacts:
        """The helpers ``script`` imports from local modules, keyed by the
        qualified names libcst gives them in ``script``."""
        real = os.path.realpath(script)
        roots = roots_of(real, self.base)
        callers = self._callers_of_file(real)
        if not self._may_import_local(real, roots):
            # no parse: a batch's cheap common case
            return ProjectFacts(
                callers=callers, library_for=self._library_for(real, callers)
            )
        tree = self.tree(real)
        if tree is None:
            return ProjectFacts(callers=callers)
        helpers: dict[str, HelperFact] = {}
        files: set[str] = set()
        # `from utils import *` binds utils' public names; a star import of a
        # module that is not local (or not read) may rebind any of them after it,
        # so names are taken from star imports only when every one is local.
        stars = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
        ]
        star_names: list[str] | None = [] if stars else None
        for star in stars:
            module = self._from_module(real, star, roots)
            names = (
                self.public_names(module[0], roots)
                if isinstance(module, tuple)
                else None
            )
            if names is None or star_names is None:
                star_names = None
            else:
                star_names.extend(names)
        stars_local = star_names is not None
        local: dict[str, set[str]] = {}  # top-level import name -> module files
        reexports: dict[str, str] = {}  # project_reexports
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = self._absolute(alias.name, roots)
                    if isinstance(target, tuple):
                        local.setdefault(alias.name.split(".")[0], set()).add(target[0])
                        _reexported(self, alias.name, target, roots, reexports)
                        self._module_helpers(
                            alias.name, target[0], real, roots, helpers, files
                        )
            elif isinstance(node, ast.ImportFrom):
                module = self._from_module(real, node, roots)
                if not isinstance(module, tuple):
                    continue
                head = (node.module or "").split(".")[0] if not node.level else "."
                local.setdefault(head, set()).add(module[0])
                spelled = "." * node.level + (node.module or "")
                for alias in node.names:
                    if alias.name == "*":
                        if stars_local:
                            self._star_helpers(module, real, roots, helpers, files)
                            _reexported(self, STAR, module, roots, reexports, star=True)
                        continue
                    prefix = (
                        f"{spelled}.{alias.name}"
                        if node.module
                        else spelled + alias.name
                    )
                    target = _attribute(self, module, alias.name)
                    _reexported(self, prefix, target, roots, reexports)
                    if isinstance(target, tuple) and not target[1]:
                        self._module_helpers(
                            prefix, target[0], real, roots, helpers, files
                        )
                    elif isinstance(target, tuple):
                        fact = self.fact(target, roots, real)
                        if fact is not None:
                            helpers[prefix] = fact
                            files.add(fact.file)
        self._named_package_helpers(tree, real, roots, local, helpers, files)
        return ProjectFacts(
            tuple(sorted(helpers.items())),
            tuple(sorted(files)),
            tuple(sorted(set(star_names))) if star_names is not None else None,
            callers,
            self._library_for(real, callers),
            local_imports=tuple(sorted(local)),
            device_imports=tuple(
                sorted(
                    name
                    for name, paths in local.items()
                    if self._names_device(paths, roots, real)
                )
            ),
            reexports=tuple(sorted(n for n in reexports.items() if n[1])),
        )

    def _named_package_helpers(
        self,
        tree: ast.Module,
        script: str,
        roots: tuple[str, ...],
        local: dict[str, set[str]],
        helpers: dict[str, HelperFact],
        files: set[str],
    ) -> None:
        """The facts of every module of a local package whose modules the script
        imports by a computed name (``dynamic_trainers.named_packages``), keyed
        as an import of each would key them (``model.gem.Net``)."""
        from .dynamic_trainers import named_packages

        for package in named_packages(tree):
            target = self._absolute(package, roots)
            if not (
                isinstance(target, tuple)
                and os.path.basename(target[0]) == "__init__.py"
            ):
                continue
            folder = os.path.dirname(target[0])
            local.setdefault(package.split(".")[0], set()).add(target[0])
            for entry in sorted(os.listdir(folder)):
                if entry.endswith(".py") and entry != "__init__.py":
                    path = os.path.realpath(os.path.join(folder, entry))
                    self._module_helpers(
                        f"{package}.{entry[:-3]}", path, script, roots, helpers, files
                    )

    def _names_device(
        self, paths: Iterable[str], roots: tuple[str, ...], script: str
    ) -> bool:
        """May a module at ``paths``, or a local module they import in turn, name
        a device (``device_free.has_device_code``)? True where one cannot be read."""
        from .device_code import has_device_code

        queue, seen = list(paths), {script}
        while queue:
            path = queue.pop()
            if path in seen:
                continue
            seen.add(path)
            tree = self.tree(path)
            if tree is None or has_device_code(tree) or len(seen) > _MAX_DEVICE_WALK:
                return True
            # importing a package's module runs the package's __init__ first
            folder = os.path.dirname(path)
            while os.path.isfile(os.path.join(folder, "__init__.py")):
                queue.append(os.path.realpath(os.path.join(folder, "__init__.py")))
                folder = os.path.dirname(folder)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    targets = [self._absolute(a.name, roots) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    targets = [self._from_module(path, node, roots)]
                else:
                    continue
                queue.extend(t[0] for t in targets if isinstance(t, tuple))
        return False

    def _star_helpers(
        self,
        module: Target,
        script: str,
        roots: tuple[str, ...],
        helpers: dict[str, HelperFact],
        files: set[str],
    ) -> None:
        """The facts of the names ``from module import *`` binds, keyed
        ``<star>.name`` (libcst gives such names no qualified name)."""
        for name in self.public_names(module[0], roots) or ():
            fact = self.fact(_attribute(self, module, name), roots, script)  # type: ignore[arg-type]
            if fact is not None:
                helpers[f"{STAR}.{name}"] = fact
                files.add(fact.file)

    def _module_helpers(
        self,
        prefix: str,
        path: str,
        script: str,
        roots: tuple[str, ...],
        helpers: dict[str, HelperFact],
        files: set[str],
    ) -> None:
        if path == script:
            return
        scan = self._scan(path, roots)
        # a package's re-exports too (`from .vgg import *` in models/__init__.py:
        # `models.vgg_tiny`, `models.__dict__[arch]`)
        exported = [
            name
            for name, target in scan.names.items()
            if isinstance(target, tuple) and target[1]
        ]
        for name in [*scan.functions, *scan.classes, *exported]:
            fact = self.fact((path, name), roots, script)
            if fact is not None:
                helpers.setdefault(f"{prefix}.{name}", fact)
                files.add(fact.file)
        if os.path.basename(path) != "__init__.py":
            return
        # a package's re-exports (`from .ppo import PPO` in algo/__init__.py),
        # reached as `algo.PPO` after `from a2c_ppo_acktr import algo`
        for name, target in scan.names.items():
            if isinstance(target, tuple) and not target[1] and prefix.count(".") < 2:
                # a module of the package it imports (`from . import utils` in
                # dataset/__init__.py): `dataset.utils.make_transform`
                self._module_helpers(
                    f"{prefix}.{name}", target[0], script, roots, helpers, files
                )
                continue
            if (
                isinstance(target, tuple)
                and target[1]
                and f"{prefix}.{name}" not in helpers
            ):
                fact = self.fact(target, roots, script)
                if fact is not None:
                    helpers[f"{prefix}.{name}"] = fact
                    files.add(fact.file)

    def fact(
        self, target: Target, roots: tuple[str, ...], script: str, depth: int = 0
    ) -> HelperFact | None:
        fact = self._fact(target, roots, script, depth)
        if (
            fact is not None
            # (the batch's calls are read first: facts read for them need not say)
            and self._callers is not None
            and self.migrated_library(target[0])
        ):
            return replace(
                fact,
                batch_library=True,
                handed_loaders=self._handed_loaders(target, roots),
            )
        return fact

    def _fact(
        self, target: Target, roots: tuple[str, ...], script: str, depth: int = 0
    ) -> HelperFact | None:
        key = (target, roots)
        if key in self._facts:
            return self._facts[key]
        if depth > _DEPTH or target[0] == os.path.realpath(script):
            return None
        self._facts[key] = None  # a cycle reads "not known"
        from .project_helpers import HelperFacts

        self._pending.add(key)
        try:
            fact = HelperFacts(self, target, roots, script, depth).result()
        finally:
            self._pending.discard(key)
        self._facts[key] = fact
        return fact


def read_project(path: str) -> ProjectFacts:
    """The facts of ``path``'s local imports (read from disk, never written); none
    for a source that is not a file (stdin, a string)."""
    if not path or path.startswith("<") or not os.path.isfile(path):
        return ProjectFacts()
    return ProjectView([path]).facts_for(path)
