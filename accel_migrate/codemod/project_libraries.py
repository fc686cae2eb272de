"""The batch's libraries: which helper modules of a batch are migrated for its
calls of them (``ProjectView.migrated_library``), and which of a function's
parameters every call hands a loader: the project view's (``project_view``)
part that reads the batch's calls across its files."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING

from .project_facts import CallSite
from .project_files import roots_of

if TYPE_CHECKING:
    from .project_view import Target


class BatchLibraries:
    """``ProjectView``'s reading of the batch's calls (a base of it: ``_scan``
    and ``_fact`` are its)."""

    scripts: frozenset[str]
    base: str
    _callers: dict[Target, tuple[CallSite, ...]] | None
    _library: dict[str, bool]
    _pending: set[tuple[Target, tuple[str, ...]]]
    _display: Callable[[str, str], str]

    def _library_for(
        self, real: str, callers: tuple[tuple[str, tuple[CallSite, ...]], ...]
    ) -> tuple[str, ...]:
        if not self.migrated_library(real):
            return ()
        files = {site.file for _, sites in callers for site in sites}
        if not files:  # shown as the callers' files are (``CallSite.file``)
            files = {self._display(f, real) for f in self._derived_trainers(real)}
        return tuple(sorted(files))

    def batch_trains(self, path: str) -> bool:
        """Is ``path`` a file of this batch that runs a backward of its own (a
        training file, migrated in its own right; the CLI's libraries are the
        batch's other imported files, left unchanged: AM102)?"""
        if path not in self.scripts or len(self.scripts) < 2:
            return False
        return self._scan(path, roots_of(path, self.base)).backward

    def migrated_library(self, path: str) -> bool:
        """Is ``path`` a helper module of this batch (no backward of its own)
        migrated for the batch's calls of it? That is so when another file of
        the batch hands one of its functions a loader at every call
        (``evaluate(model, test_loader)``, ``predict(model, loader)``): what it
        sums, collects or logs over the loader, which its caller shards, is
        reduced there. It is so too when another file calls one of its helpers
        that writes files or prints, builds no loader, model, optimizer or loss,
        and does more besides (hands a value back, keeps state:
        ``save_snapshot`` returning its path, a ``Logger`` class that keeps
        ``sys.stdout``, a progress bar with ``global`` timers): such a helper
        cannot be moved to the main process at its call, so its writes and
        prints are made main-process ones in its own file. The rules that
        prepare (``Rule.prepares``) do not run on it: its callers prepare what
        its helpers build (AM102). A module with a helper that calls
        collectives is left to its callers."""
        if path not in self.scripts or len(self.scripts) < 2:
            return False
        if path not in self._library:
            self._library[path] = False  # a cycle of modules reads "not"
            found = self._migrated_library(path)
            if self._pending:
                # asked while a fact is being read (``noisify``'s, whose helper
                # ``noisify_pairflip`` prints): that fact reads "not known"
                # here, so the answer is not kept; asked again once it is read
                del self._library[path]
                return found
            self._library[path] = found
        return self._library[path]

    def _migrated_library(self, path: str) -> bool:
        callers = self._callers_of_file(path)
        if self.batch_trains(path):
            return False
        if not callers:
            return bool(self._derived_trainers(path)) and not self._calls_collectives(
                path
            )
        roots = roots_of(path, self.base)
        scan = self._scan(path, roots)
        facts = {
            name: self._fact((path, name), roots, "")
            for name in [*scan.functions, *scan.classes]
        }
        if any(f is not None and f.collectives for f in facts.values()):
            return False
        if any(_handed_a_loader(sites) for _, sites in callers):
            return True
        # what AM017 would otherwise report at the call (helper_effects.helper_call)
        called = {name.split(".")[0] for name, _ in callers}
        return any(
            (fact := facts.get(name)) is not None
            and fact.side_effects
            and not fact.returns
            and not fact.effects_only
            for name in called
        )

    def _derived_trainers(self, path: str) -> tuple[str, ...]:
        """The training files of the batch that define a class whose base is a
        class of ``path`` (nnU-Net's ``nnUNetTrainer(NetworkTrainer)``, whose
        inherited ``run_training`` loop prints, logs and saves checkpoints on
        every process). The base's methods run in their training: its writes
        and prints are made main-process ones in its own file."""
        found: list[str] = []
        for other in sorted(self.scripts):
            if other == path or not self.batch_trains(other):
                continue
            scan = self._scan(other, roots_of(other, self.base))
            for cls in scan.classes.values():
                for base in cls.bases:
                    target = _base_target(scan.names, base)
                    if target is not None and target[0] == path and target[1]:
                        found.append(other)
        return tuple(dict.fromkeys(found))

    def _calls_collectives(self, path: str) -> bool:
        roots = roots_of(path, self.base)
        scan = self._scan(path, roots)
        return any(
            (fact := self._fact((path, name), roots, "")) is not None
            and fact.collectives
            for name in [*scan.functions, *scan.classes]
        )

    def _callers_of_file(
        self, real: str
    ) -> tuple[tuple[str, tuple[CallSite, ...]], ...]:
        """The batch's calls of ``real``'s functions from its other files (read
        once per view, for every file: ``project_callers``)."""
        if len(self.scripts) < 2 or real not in self.scripts:
            return ()
        if self._callers is None:
            from .project_callers import batch_callers

            self._callers = batch_callers(self)
        return tuple(
            sorted(
                (name, sites)
                for (path, name), sites in self._callers.items()
                if path == real
            )
        )

    def _handed_loaders(
        self, target: Target, roots: tuple[str, ...]
    ) -> tuple[tuple[str, int], ...]:
        """``HelperFact.handed_loaders`` of the function ``target``. Stricter than
        its module's ``given_by_callers`` (any call of its name in the module
        counts), so that a caller never counts on a reduction the module does
        not make."""
        path, name = target
        scan = self._scan(path, roots)
        function = scan.functions.get(name)
        sites = dict(self._callers_of_file(path)).get(name, ())
        if function is None or not sites or _calls_name(scan.tree, name):
            return ()
        positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
        found = []
        for parameter in [*positional, *(a.arg for a in function.args.kwonlyargs)]:
            if all(site.kind(parameter) == "loader" for site in sites):
                at = positional.index(parameter) if parameter in positional else -1
                found.append((parameter, at))
        return tuple(found)


def _calls_name(tree: ast.Module | None, name: str) -> bool:
    """Does ``tree`` call ``name`` (``name(...)``, ``x.name(...)``) anywhere?"""
    return tree is not None and any(
        isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == name)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
        )
        for node in ast.walk(tree)
    )


def handed_loaders(callers: tuple[tuple[str, tuple[CallSite, ...]], ...]) -> bool:
    """Is a helper module migrated for its callers (``ProjectFacts.callers``)
    handed a loader by them, rather than migrated for its writes and prints
    alone? (AM103 reads it: a helper handed loaders that comes back unchanged
    may still sum this process's share over them.)"""
    return any(_handed_a_loader(sites) for _, sites in callers if sites)


def _handed_a_loader(sites: tuple[CallSite, ...]) -> bool:
    """Does every one of a function's calls hand one same parameter a loader?"""
    first = {name for name, kind in sites[0].arguments if kind == "loader"}
    return any(all(site.kind(name) == "loader" for site in sites) for name in first)


def _base_target(names: dict[str, str | Target], base: ast.expr) -> Target | None:
    """The local class a class statement's base names: ``NetworkTrainer``
    imported from its module, or ``network_trainer.NetworkTrainer``."""
    if isinstance(base, ast.Name):
        found = names.get(base.id)
        return found if isinstance(found, tuple) else None
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
        module = names.get(base.value.id)
        if isinstance(module, tuple) and not module[1]:
            return (module[0], base.attr)
    return None
