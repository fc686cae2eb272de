"""The questions rules ask of the divergence analysis about where a node runs.

Once ``Divergence`` has walked a file, a rule asks: is this place reached on
every rank alike (``uniform``), does it run a rank-dependent number of times
(``runs_divergently``), is it straight-line setup code before anything trains
(``setup_position``, ``trains``), may a random draw there differ between ranks
(``random_is_local``)? ``DivergenceQueries`` answers them from the analysis's
results; ``Divergence`` inherits it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .divergence_finders import _TrainingFinder

if TYPE_CHECKING:
    from .analysis import ModuleIndex


class DivergenceQueries:
    """Where-does-it-run questions over the results of ``Divergence``'s walk."""

    index: ModuleIndex
    divergent: set[cst.CSTNode]
    local_increments: set[cst.AugAssign]
    _function_uniform: dict[cst.FunctionDef, bool]
    _setup_functions: dict[cst.FunctionDef, bool]
    _trains: dict[cst.CSTNode, bool]

    def rank_local(self, increment: cst.AugAssign) -> bool:
        """Does ``x += value`` add something that differs between ranks?"""
        return increment in self.local_increments

    def uniform(self, node: cst.CSTNode) -> bool:
        for current in (node, *self.index.ancestors(node)):
            if current in self.divergent:
                return False
            if isinstance(current, cst.FunctionDef):
                return self._function_is_uniform(current)
        return True

    def random_is_local(self, call: cst.Call) -> bool:
        """May a random draw at ``call`` differ between ranks (see
        ``RANDOM_CALL_PREFIXES``)? Not in straight-line setup code before any
        training, nor from an explicit generator."""
        if any(
            arg.keyword is not None and arg.keyword.value == "generator"
            for arg in call.args
        ):
            return False
        return not self.setup_position(call)

    def setup_position(self, node: cst.CSTNode) -> bool:
        """Does ``node`` run once per call of its function, before anything trains
        (a backward, an optimizer step, a loop over a data loader), in a function
        that is itself only called from such places (or module code)?"""
        child: cst.CSTNode = node
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
                return False
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)):
                body = ancestor.body
                for statement in body:
                    if statement is child:
                        break
                    if self.trains(statement):
                        return False
            if isinstance(ancestor, cst.FunctionDef):
                return self._setup_function(ancestor)
            if isinstance(ancestor, cst.Lambda):
                return False
            child = ancestor
        return True

    def _setup_function(self, function: cst.FunctionDef) -> bool:
        if function in self._setup_functions:
            return self._setup_functions[function]
        self._setup_functions[function] = False  # recursion: not setup
        sites = self.index.call_sites(function)
        if sites:
            result = all(self.setup_position(site) for site in sites)
        else:
            # No call in this file: a module-level function is an entry point
            # (main); a method or nested function may be called during training.
            result = isinstance(self.index.parent(function), cst.Module)
        self._setup_functions[function] = result
        return result

    def trains(self, node: cst.CSTNode) -> bool:
        """Does running ``node`` (a statement) train: a backward, an optimizer step,
        a loop over a data loader, or a call of a local function that does?"""
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return False  # a definition runs nothing
        if node in self._trains:
            return self._trains[node]
        self._trains[node] = False  # recursion
        finder = _TrainingFinder(self)
        node.visit(finder)
        self._trains[node] = finder.found
        return finder.found

    def _function_is_uniform(self, function: cst.FunctionDef) -> bool:
        if function in self._function_uniform:
            return self._function_uniform[function]
        self._function_uniform[function] = (
            True  # recursion: assume the best, then check
        )
        result = all(self.uniform(call) for call in self.index.call_sites(function))
        self._function_uniform[function] = result
        return result

    def runs_divergently(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in a block that runs a rank-dependent number of times (the
        body of a loop over a rank-local iterable, a branch on a rank-local test)
        in its function?"""
        for ancestor in self.index.ancestors(node):
            if ancestor in self.divergent:
                return True
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return False
        return False
