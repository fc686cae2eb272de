"""What the rules need to know about a module beyond one node.

- ``ModuleIndex.tagged``: which variables hold a model, a loader, an optimizer...:
  seeded by the expressions assigned to them and carried through plain aliasing,
  ``self.x = x`` attributes, and arguments of calls to functions, methods and
  constructors defined in the same module.
- ``ModuleIndex.uniform``: whether every rank reaches a statement together, so a
  collective may be placed there (see ``divergence``).

Variables are named by a key: ``(scope, name)`` for names, ``(class, "self.x")``
for attributes set on ``self`` in a method.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst
from libcst.metadata import MetadataWrapper, QualifiedName

from . import subtrees
from .index_collect import collect
from .index_loaders import LoaderFacts
from .index_locals import LocalDefinitions
from .index_steps import TrainingSteps
from .index_syntax import (
    RUNTIME,
    Key,
    Seed,
    _all_params,
    _nodes_run_by,
    _RunBy,
    _VariableNames,
    attr_chain,
    bind_arguments,
    method_call,
    variable_names,
)
from .index_tagging import Tagging
from .parents import ParentProvider
from .project_facts import HelperFact
from .project_file_facts import ProjectFacts
from .project_reexports import with_library_names as reexported
from .scopes import ScopeProvider

#: Re-exported: the rules import the index's helpers from here.
__all__ = [
    "RUNTIME",
    "Key",
    "LazyQualifiedNames",
    "ModuleIndex",
    "Seed",
    "_RunBy",
    "_VariableNames",
    "_nodes_run_by",
    "attr_chain",
    "bind_arguments",
    "method_call",
    "variable_names",
]

if TYPE_CHECKING:
    from .divergence import Divergence
    from .divergence_memo import DivergenceMemo
    from .function_syntax import FunctionSyntax
    from .rank_local_options import RankLocalOptions
    from .rank_local_sources import RankLocalSources
    from .reached_calls import ReachedCalls
    from .reduction.batch_tensors import BatchTensors
    from .returned_loss import ReturnedLosses


_RUNTIME_PREFIX = RUNTIME + "."
_RUNTIME_DOT = len(_RUNTIME_PREFIX)


class LazyQualifiedNames:
    """What libcst's ``QualifiedNameProvider`` answers, computed only for the nodes
    asked about. The provider visits every node of the module to attach a lazy
    value to each: after every rule that changes the tree, that visit alone cost
    more than the rule (measured: 0.5 s of 0.7 s on a 900-line file)."""

    def __init__(
        self, scopes: Mapping[cst.CSTNode, Any], reexports: Mapping[str, str] = {}
    ) -> None:
        self._scopes = scopes
        self._cache: dict[cst.CSTNode, Collection[QualifiedName]] = {}
        #: Per node asked: its qualified names' strings (``names``).
        self._names: dict[cst.CSTNode, frozenset[str]] = {}
        #: A local module's names that are a library's (``project_reexports``).
        self._reexports = reexports

    def get(self, node: cst.CSTNode, default: Any = None) -> Any:
        found = self._cache.get(node)
        if found is not None:
            return found
        if node not in self._scopes:
            return default  # not in this tree (a node a rule has just built)
        scope = self._scopes[node]
        found = scope.get_qualified_names_for(node) if scope is not None else set()
        if self._reexports and scope is not None:
            found = reexported(self._reexports, node, scope, found)
        self._cache[node] = found
        return found

    def names(self, node: cst.CSTNode) -> frozenset[str]:
        """The strings of ``get(node)``'s qualified names (none for a node not
        in this tree), made once per node: ``ModuleIndex.qualnames`` and
        ``Rule.qualnames`` are asked tens of thousands of times a pass, most of
        them again for a node asked before (round 24 of issue 14)."""
        found = self._names.get(node)
        if found is None:
            found = self._names[node] = frozenset(q.name for q in self.get(node, ()))
        return found


class ModuleIndex(Tagging, LoaderFacts, TrainingSteps, LocalDefinitions):
    def __init__(
        self,
        wrapper: MetadataWrapper,
        alias: str,
        qualnames: LazyQualifiedNames | None = None,
        project: ProjectFacts | None = None,
    ) -> None:
        self.module = wrapper.module
        # Subtree questions about this tree are answered from one walk of it.
        subtrees.register(self.module)
        #: What the file's local imports define (``project_view``).
        self.project = project or ProjectFacts()
        self.alias = alias
        self._alias_prefix = alias + "."
        self._scopes = wrapper.resolve(ScopeProvider)
        self._qualnames = qualnames or LazyQualifiedNames(
            self._scopes, dict(self.project.reexports)
        )
        #: libcst's QualifiedNameProvider answers, for the nodes asked about.
        self.qualified_names = self._qualnames
        self._parents = wrapper.resolve(ParentProvider)
        #: ``key`` of a name, per (scope, name): what it is bound to depends on
        #: nothing else, and the scopes are complete before any is asked.
        self._name_keys: dict[tuple[Any, str], Key] = {}
        collector = collect(self)  # from the tree's preorder (index_collect)
        self.values: dict[Key, list[cst.BaseExpression | None]] = collector.values
        #: ``a, b = f(x)``: the value each target was unpacked from, its position
        #: and the number of targets (its ``values`` entry is None: not known).
        self.unpacked: dict[Key, list[tuple[cst.BaseExpression, int, int]]] = (
            collector.unpacked
        )
        self.functions: list[cst.FunctionDef] = collector.functions
        self.classes: list[cst.ClassDef] = collector.classes
        self.calls: list[cst.Call] = collector.calls
        self.for_loops: list[cst.For] = collector.for_loops
        #: Names a ``match`` pattern binds (libcst's scopes do not record them),
        #: and whether a ``from m import *`` may bind any name.
        self.match_captures: set[str] = collector.match_captures
        self.star_import: bool = collector.star_import
        self._callees: dict[cst.Call, tuple[cst.FunctionDef, int] | None] = {}
        #: Shared by the indexes of one file's trees (``RuleContext``).
        self.divergence_memo: DivergenceMemo | None = None
        #: Shared by the indexes of one file's trees (``RuleContext``); None:
        #: this index's own (``function_syntax``).
        self._function_syntax: FunctionSyntax | None = None

    @property
    def function_syntax(self) -> FunctionSyntax:
        """Facts of a function's own syntax (``function_syntax``)."""
        if self._function_syntax is None:
            from .function_syntax import FunctionSyntax

            self._function_syntax = FunctionSyntax()
        return self._function_syntax

    # -- basic lookups ---------------------------------------------------------------
    def helper(self, func: cst.BaseExpression, returns: str = "") -> HelperFact | None:
        """The project fact of the local module's function or class ``func`` names
        (one that returns ``returns``, where given)."""
        if not self.project:
            return None
        names = self.qualnames(func)
        if not names and self.star_import and isinstance(func, cst.Name):
            # `from utils import *`: the view lists what it binds (project_view)
            scope = self._scopes.get(func)
            if scope is not None and not scope[func.value]:
                names = {f"<star>.{func.value}"}
        fact = self.project.lookup(names)
        if fact is None and isinstance(func, cst.Name):
            # `Exp = Exp_Informer` then `Exp(args)`: a name bound once, to an
            # imported class or function, is that class or function
            alias = self._alias_of(func)
            if alias is not None:
                fact = self.project.lookup(self.qualnames(alias))
        if fact is None or (returns and fact.returns != returns):
            return None
        return fact

    def _alias_of(self, name: cst.Name) -> cst.BaseExpression | None:
        """The one name or attribute ``name`` is bound to (``Exp = Exp_Informer``),
        or None."""
        key = self.key(name)
        values = self.values.get(key, ()) if key is not None else ()
        if len(values) != 1 or not isinstance(values[0], (cst.Name, cst.Attribute)):
            return None
        value = values[0]
        if isinstance(value, cst.Name) and value.value == name.value:
            return None
        return value

    def bound_in_module(self, name: str) -> bool:
        """Is ``name`` assigned, defined or imported anywhere in the file (or may a
        ``from m import *`` bind it)? Then a builtin of that name cannot be used."""
        if self.star_import:
            known = self.project.star_names
            if known is None or name in known:
                return True
        if any(key[1] == name for key in self.values):
            return True
        scopes = {s for s in self._scopes.values() if s is not None}
        return any(name in scope.assignments for scope in scopes)

    def imported_once(self, name: str) -> bool:
        """Is ``name``'s only binding in the file one import at module level
        (``from data import PAD``)? It then means one value everywhere."""
        if self.star_import or any(key[1] == name for key in self.values):
            return False
        scopes = {s for s in self._scopes.values() if s is not None}
        found = [a for scope in scopes for a in scope.assignments[name]]
        return (
            len(found) == 1
            and isinstance(found[0].node, (cst.Import, cst.ImportFrom))
            and found[0].scope is found[0].scope.globals
        )

    def qualnames(self, node: cst.CSTNode) -> set[str]:
        # a copy: callers may change the set they are given
        return set(self._qualnames.names(node))

    def is_call_to(self, node: cst.CSTNode, names: Iterable[str]) -> bool:
        return isinstance(node, cst.Call) and not self.qualnames(node.func).isdisjoint(
            names
        )

    #: Where ``code`` comes from when the file's engine knows a cheaper way than
    #: a whole code generation (``RuleContext.code_of``: the parsed source, or
    #: a changed tree's code generated with its positions, only its new
    #: statements); None: ``Module.code``.
    code_source: Callable[[], str] | None = None

    @cached_property
    def code(self) -> str:
        """This tree's source, generated once (text searches that gate a fact:
        ``"parse_" in index.code``)."""
        if self.code_source is not None:
            return self.code_source()
        return self.module.code

    @cached_property
    def called_names(self) -> frozenset[str]:
        """The qualified names of every call's callee in this tree (what
        ``Rule.is_call_to`` compares): the facts a rule's ``applies`` gate reads
        off the parsed tree."""
        found: set[str] = set()
        for call in self.calls:
            found |= self.qualnames(call.func)
        return frozenset(found)

    @cached_property
    def called_attributes(self) -> frozenset[str]:
        """The attribute names of every method-like call (``x.cuda()``: "cuda")."""
        return frozenset(
            call.func.attr.value
            for call in self.calls
            if isinstance(call.func, cst.Attribute)
        )

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self._parents.get(node)
        while current is not None:
            yield current
            current = self._parents.get(current)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def in_except(self, node: cst.CSTNode) -> bool:
        """Is ``node`` in an ``except`` block (error output, left to every process)?"""
        return any(isinstance(a, cst.ExceptHandler) for a in self.ancestors(node))

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        function = self.enclosing_function(node)
        if function is None:
            return None
        parent = self._parents.get(function)
        if isinstance(parent, cst.IndentedBlock):
            parent = self._parents.get(parent)
        return parent if isinstance(parent, cst.ClassDef) else None

    def is_runtime_call(self, node: cst.CSTNode, *names: str) -> bool:
        if not isinstance(node, cst.Call):
            return False
        qualnames = self._qualnames.names(node.func)  # read only: no copy
        if qualnames and any(
            q[_RUNTIME_DOT:] in names
            for q in qualnames
            if q.startswith(_RUNTIME_PREFIX)
        ):
            return True
        chain = attr_chain(node.func)
        return (
            chain is not None
            and chain.startswith(self._alias_prefix)
            and chain[len(self._alias_prefix) :] in names
        )

    def key(self, node: cst.CSTNode) -> Key | None:
        """The variable an expression names, if it names one."""
        if isinstance(node, cst.Name):
            scope = self._scopes.get(node)
            if scope is None:
                return None
            name = node.value
            found = self._name_keys.get((scope, name))
            if found is None:
                assignments = scope[name]
                found = self._name_keys[scope, name] = (
                    (next(iter(assignments)).scope, name)
                    if assignments
                    else (scope.globals, name)
                )
            return found
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
        ):
            cls = self.enclosing_class(node)
            if cls is not None:
                return (cls, f"self.{node.attr.value}")
        return None

    def function_scope_key(self, function: cst.FunctionDef, name: str) -> Key:
        for param in _all_params(function.params):
            if param.name.value == name:
                scope = self._scopes.get(param.name)
                return (scope, name)
        return (None, name)

    # -- divergence ------------------------------------------------------------------------
    @cached_property
    def divergence(self) -> Divergence:
        from .divergence import Divergence

        return Divergence(self)

    @cached_property
    def reached_calls(self) -> ReachedCalls:
        """The calls a call runs through the local functions it calls
        (``reached_calls``)."""
        from .reached_calls import ReachedCalls

        return ReachedCalls(self)

    @cached_property
    def rank_local_sources(self) -> RankLocalSources:
        """Why a rank-local value differs between processes (its provenance:
        the clock, a draw, the data), for findings (``rank_local_sources``)."""
        from .rank_local_sources import RankLocalSources

        return RankLocalSources(self)

    @cached_property
    def rank_local_options(self) -> RankLocalOptions:
        """Command-line options whose ``default=`` reads a rank variable
        (``rank_local_options``)."""
        from .rank_local_options import RankLocalOptions

        return RankLocalOptions(self)

    @cached_property
    def batch_tensors(self) -> BatchTensors:
        """What a loss list's loops walk: the loader loops' variables, those read
        as tensors, the options the file writes (``reduction.batch_tensors``)."""
        from .reduction.batch_tensors import BatchTensors

        return BatchTensors(self)

    @cached_property
    def returned_losses(self) -> ReturnedLosses:
        """Functions that return a loss they backpropagate, and the callers'
        variables that hold it (see ``returned_loss``)."""
        from .returned_loss import ReturnedLosses

        return ReturnedLosses(self)

    def uniform(self, node: cst.CSTNode) -> bool:
        """True when every rank reaches ``node`` together (a collective is safe
        there): no rank-dependent branch decides it (``divergence``), and no test
        of the file system, which each process makes at its own moment, while the
        main process may be writing the file (``file_tests``)."""
        from .file_tests import racy_file_test

        return self.divergence.uniform(node) and racy_file_test(self, node) is None
