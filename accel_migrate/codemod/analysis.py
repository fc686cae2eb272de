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

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

import libcst as cst
import libcst.matchers as m
from libcst.metadata import MetadataWrapper, QualifiedName

from . import subtrees
from .names import TQDM_CALLS
from .parents import ParentProvider
from .project_facts import HelperFact, ProjectFacts
from .scopes import ScopeProvider

if TYPE_CHECKING:
    from .divergence import Divergence
    from .returned_loss import ReturnedLosses

Key = tuple[object, str]
Seed = Callable[[cst.BaseExpression], bool]

RUNTIME = "accel_migrate.runtime"
_LOOP_WRAPPERS = {"enumerate", "zip", "iter", "tqdm"}
_LOOP_QUALNAMES = {
    "builtins.enumerate",
    "builtins.zip",
    "builtins.iter",
    "tqdm.tqdm",
    "tqdm.auto.tqdm",
    "tqdm.notebook.tqdm",
}


def attr_chain(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` as a string, or None for anything that is not names and dots."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = attr_chain(node.value)
        return None if inner is None else f"{inner}.{node.attr.value}"
    return None


def variable_names(node: cst.CSTNode) -> list[cst.Name]:
    """Names used as variables in ``node``: not attribute names, not keywords."""
    shared = subtrees.variable_names(node)
    if shared is not None:
        return shared
    names = _VariableNames()
    node.visit(names)
    return names.found


class _VariableNames(cst.CSTVisitor):
    # A module-level class (not one per call): fastvisit resolves a visitor
    # class's hooks once.
    def __init__(self) -> None:
        super().__init__()
        self.found: list[cst.Name] = []

    def visit_Name(self, name: cst.Name) -> None:
        self.found.append(name)

    def visit_Attribute(self, attribute: cst.Attribute) -> bool:
        attribute.value.visit(self)
        return False

    def visit_Arg(self, arg: cst.Arg) -> bool:
        arg.value.visit(self)
        return False


def method_call(node: cst.CSTNode, *names: str) -> cst.Attribute | None:
    """The ``receiver.method`` of a call to one of ``names``, if it is one."""
    if (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value in names
    ):
        return node.func
    return None


class LazyQualifiedNames:
    """What libcst's ``QualifiedNameProvider`` answers, computed only for the nodes
    asked about. The provider visits every node of the module to attach a lazy
    value to each: after every rule that changes the tree, that visit alone cost
    more than the rule (measured: 0.5 s of 0.7 s on a 900-line file)."""

    def __init__(self, scopes: Mapping[cst.CSTNode, Any]) -> None:
        self._scopes = scopes
        self._cache: dict[cst.CSTNode, Collection[QualifiedName]] = {}

    def get(self, node: cst.CSTNode, default: Any = None) -> Any:
        found = self._cache.get(node)
        if found is not None:
            return found
        if node not in self._scopes:
            return default  # not in this tree (a node a rule has just built)
        scope = self._scopes[node]
        found = scope.get_qualified_names_for(node) if scope is not None else set()
        self._cache[node] = found
        return found


class ModuleIndex:
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
        self._scopes = wrapper.resolve(ScopeProvider)
        self._qualnames = qualnames or LazyQualifiedNames(self._scopes)
        #: libcst's QualifiedNameProvider answers, for the nodes asked about.
        self.qualified_names = self._qualnames
        self._parents = wrapper.resolve(ParentProvider)
        collector = _Collector(self)
        self.module.visit(collector)
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
        if fact is None or (returns and fact.returns != returns):
            return None
        return fact

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
        return {q.name for q in self._qualnames.get(node, ())}

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
        qualnames = self.qualnames(node.func)
        if any(q in {f"{RUNTIME}.{n}" for n in names} for q in qualnames):
            return True
        chain = attr_chain(node.func)
        return chain is not None and chain in {f"{self.alias}.{n}" for n in names}

    def key(self, node: cst.CSTNode) -> Key | None:
        """The variable an expression names, if it names one."""
        if isinstance(node, cst.Name):
            scope = self._scopes.get(node)
            if scope is None:
                return None
            assignments = scope[node.value]
            if assignments:
                return (next(iter(assignments)).scope, node.value)
            return (scope.globals, node.value)
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

    # -- local classes ------------------------------------------------------------------
    def local_subclasses(self, base_prefixes: Iterable[str]) -> set[cst.ClassDef]:
        """Classes of this module deriving, directly or through each other, from a base
        whose qualified name starts with one of ``base_prefixes``."""
        prefixes = tuple(base_prefixes)
        found: set[cst.ClassDef] = set()
        changed = True
        while changed:
            changed = False
            for cls in self.classes:
                if cls in found:
                    continue
                for base in cls.bases:
                    names = self.qualnames(base.value)
                    local = self.local_class(base.value)
                    if any(n.startswith(prefixes) for n in names) or local in found:
                        found.add(cls)
                        changed = True
                        break
        return found

    def local_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        if not isinstance(node, cst.Name):
            return None
        scope = self._scopes.get(node)
        if scope is None:
            return None
        for assignment in scope[node.value]:
            if isinstance(getattr(assignment, "node", None), cst.ClassDef):
                return assignment.node  # type: ignore[return-value]
        return None

    def local_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        if isinstance(node, cst.Name):
            scope = self._scopes.get(node)
            if scope is None:
                return None
            for assignment in scope[node.value]:
                if isinstance(getattr(assignment, "node", None), cst.FunctionDef):
                    return assignment.node  # type: ignore[return-value]
        if (
            isinstance(node, cst.Attribute)
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
        ):
            cls = self.enclosing_class(node)
            if cls is not None:
                return _method(cls, node.attr.value)
        return None

    def callee(self, call: cst.Call) -> tuple[cst.FunctionDef, int] | None:
        """The local function a call runs, and how many leading parameters it binds
        itself (1 for ``self``)."""
        # Asked tens of thousands of times a pass (call_sites, arguments, the
        # divergence analysis): each call's answer is kept with this tree's index.
        try:
            return self._callees[call]
        except KeyError:
            found = self._callees[call] = self._find_callee(call)
            return found

    def _find_callee(self, call: cst.Call) -> tuple[cst.FunctionDef, int] | None:
        function = self.local_function(call.func)
        if function is not None:
            bound = 1 if isinstance(call.func, cst.Attribute) else 0
            return function, bound
        cls = self.local_class(call.func)
        if cls is not None:
            init = _method(cls, "__init__")
            if init is not None:
                return init, 1
        return None

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call]:
        return list(self._call_sites.get(function, ()))

    @cached_property
    def _call_sites(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        """Each local function's calls in this tree, in the tree's order."""
        sites: dict[cst.FunctionDef, list[cst.Call]] = {}
        for call in self.calls:
            found = self.callee(call)
            if found is not None:
                sites.setdefault(found[0], []).append(call)
        return sites

    def arguments(self, call: cst.Call) -> Iterator[tuple[Key, cst.BaseExpression]]:
        """The parameters of the local function a call runs, and what it passes them."""
        target = self.callee(call)
        if target is None:
            return
        function, bound = target
        for param_name, arg in bind_arguments(function, bound, call):
            yield self.function_scope_key(function, param_name), arg

    # -- tagging variables ------------------------------------------------------------------
    def tagged(
        self,
        seed: Seed,
        same_object: frozenset[str] = frozenset(),
        through: (
            Callable[[cst.BaseExpression], cst.BaseExpression | None] | None
        ) = None,
        returns: bool = False,
        positional: Callable[[cst.BaseExpression, int, int], bool] | None = None,
    ) -> set[Key]:
        """Variables that may hold what ``seed`` recognises.

        ``same_object``: methods that return their receiver (``.to`` on a module).
        ``through``: the argument a wrapping call stands for, if it is one
        (``tqdm(loader)`` for a loader).
        ``returns``: a call of a local function holds it when every ``return`` of
        the function does (``loader = make_loader()``), and ``a, b = f()`` unpacks
        it where every ``return`` of ``f`` is a tuple display of that length whose
        item holds it (``return train_loader, val_loader``).
        ``positional``: whether ``value``'s item ``i`` of ``n`` holds it, for
        ``a, b = value`` the module cannot see into (another module's function).
        """
        tagged: set[Key] = set()
        active: set[cst.FunctionDef] = set()
        returned_by: dict[cst.FunctionDef, list[cst.BaseExpression | None]] = {}

        def returned(call: cst.Call) -> list[cst.BaseExpression] | None:
            function = self.local_function(call.func)
            if function is None or function in active:
                return None
            if function not in returned_by:
                returned_by[function] = _returned_values(function)
            values = returned_by[function]
            if not values or any(v is None for v in values):
                return None
            return values  # type: ignore[return-value]

        def holds_all(function_call: cst.Call, pick: Callable[[Any], Any]) -> bool:
            values = returned(function_call)
            if values is None:
                return False
            function = self.local_function(function_call.func)
            active.add(function)  # type: ignore[arg-type]
            try:
                return all(holds(pick(v)) for v in values)
            finally:
                active.discard(function)  # type: ignore[arg-type]

        def holds(expr: cst.BaseExpression | None) -> bool:
            while expr is not None:
                if seed(expr):
                    return True
                key = self.key(expr)
                if key is not None:
                    return key in tagged
                if returns and isinstance(expr, cst.Call):
                    if holds_all(expr, lambda v: v):
                        return True
                attribute = method_call(expr, *same_object) if same_object else None
                if attribute is not None:
                    expr = attribute.value
                    continue
                expr = through(expr) if through is not None else None
            return False

        def item(value: Any, i: int, n: int) -> cst.BaseExpression | None:
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == n
                and not any(isinstance(e, cst.StarredElement) for e in value.elements)
            ):
                return value.elements[i].value
            return None

        def unpacks(value: cst.BaseExpression, i: int, n: int) -> bool:
            if positional is not None and positional(value, i, n):
                return True
            return (
                returns
                and isinstance(value, cst.Call)
                and holds_all(value, lambda v: item(v, i, n))
            )

        changed = True
        while changed:
            changed = False
            for key, values in self.values.items():
                if key not in tagged and any(holds(v) for v in values):
                    tagged.add(key)
                    changed = True
            if returns or positional is not None:
                for key, sources in self.unpacked.items():
                    if key not in tagged and any(unpacks(*s) for s in sources):
                        tagged.add(key)
                        changed = True
            for call in self.calls:
                target = self.callee(call)
                if target is None:
                    continue
                function, bound = target
                for param_name, arg in bind_arguments(function, bound, call):
                    key = self.function_scope_key(function, param_name)
                    if key not in tagged and holds(arg):
                        tagged.add(key)
                        changed = True
        return tagged

    def flows_into(
        self, keys: set[Key], same_object: frozenset[str] = frozenset()
    ) -> set[Key]:
        """``keys`` and every variable whose value may reach them, through plain
        aliasing (``self.model = model``) and arguments of calls to local functions."""
        result = set(keys)

        def source(expr: cst.BaseExpression | None) -> Key | None:
            while expr is not None:
                key = self.key(expr)
                if key is not None:
                    return key
                attribute = method_call(expr, *same_object) if same_object else None
                expr = attribute.value if attribute is not None else None
            return None

        changed = True
        while changed:
            changed = False
            for key, values in self.values.items():
                if key in result:
                    for value in values:
                        origin = source(value)
                        if origin is not None and origin not in result:
                            result.add(origin)
                            changed = True
            for call in self.calls:
                target = self.callee(call)
                if target is None:
                    continue
                for param_name, arg in bind_arguments(target[0], target[1], call):
                    if self.function_scope_key(target[0], param_name) in result:
                        origin = source(arg)
                        if origin is not None and origin not in result:
                            result.add(origin)
                            changed = True
        return result

    def root_key(self, expr: cst.BaseExpression) -> Key | None:
        """The variable at the root of ``a.b.c`` (``a``), or ``self.a`` in a method."""
        while True:
            key = self.key(expr)
            if key is not None or not isinstance(expr, cst.Attribute):
                return key
            expr = expr.value

    def holds_tagged(self, expr: cst.BaseExpression, tagged: set[Key]) -> bool:
        key = self.key(expr)
        return key is not None and key in tagged

    @cached_property
    def loaders(self) -> set[Key]:
        from .patterns import is_loader_seed
        from .project_callers import given_by_callers

        # parameters every call from the batch's other files hands a loader
        handed = set(given_by_callers(self, "loader"))
        if self.project.library_for:
            # a helper module migrated for its callers: the loaders it builds are
            # theirs to shard where they call it (AM102); those they hand it are
            # sharded
            return (
                self.tagged(lambda e: self.key(e) in handed, through=self._loop_wrapped)
                | handed
            )
        items = self._container_items
        found = self.tagged(
            lambda e: is_loader_seed(self, e)
            or self._loader_item(e)
            or self.key(e) in items
            or self.key(e) in handed,
            through=self._loop_wrapped,
            returns=True,
            positional=self._unpacked_loader,
        )
        return found | items | handed

    def _unpacked_loader(self, value: cst.BaseExpression, i: int, n: int) -> bool:
        """``train_loader, val_loader = utils.get_loaders(args)``: item ``i`` of a
        tuple of loaders a local module's function returns (AM006 prepares them
        there), or of ``map(accel.prepare_dataloader, ...)`` (what it writes)."""
        from .patterns import loader_tuple_helper, prepared_loader_map

        if prepared_loader_map(self, value):
            return True
        helper = loader_tuple_helper(self, value)
        return helper is not None and len(helper.items) == n

    @cached_property
    def _direct_loaders(self) -> set[Key]:
        """Variables holding a loader, not counting those taken out of containers."""
        from .patterns import is_loader_seed

        return self.tagged(
            lambda e: is_loader_seed(self, e),
            through=self._loop_wrapped,
            returns=True,
            positional=self._unpacked_loader,
        )

    @cached_property
    def _container_items(self) -> set[Key]:
        """Loop variables that step through a container of loaders:
        ``for name, loader in loaders.items()``, ``for loader in loaders.values()``,
        ``for loader in [train_loader, val_loader]``."""
        found: set[Key] = set()
        for loop in self.for_loops:
            iterable, target = loop.iter, loop.target
            method = method_call(iterable, "items", "values")
            if method is not None and not iterable.args:  # type: ignore[attr-defined]
                if not self.holds_tagged(method.value, self.loader_containers):
                    continue
                if method.attr.value == "items":
                    if not (
                        isinstance(target, (cst.Tuple, cst.List))
                        and len(target.elements) == 2
                    ):
                        continue
                    target = target.elements[1].value
            elif not (
                self.holds_tagged(iterable, self.loader_containers)
                or self._holds_loaders(iterable)
            ):
                continue
            key = self.key(target)
            if key is not None:
                found.add(key)
        return found

    def _loop_wrapped(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """``tqdm(loader, ...)``, ``enumerate(loader)``, ``iter(loader)``: the
        iterable such a wrapper steps through (its first positional argument)."""
        if not isinstance(expr, cst.Call) or not expr.args:
            return None
        first = expr.args[0]
        if first.keyword is not None or first.star:
            return None
        name = attr_chain(expr.func) or ""
        if name in _LOOP_WRAPPERS or self.qualnames(expr.func) & _LOOP_QUALNAMES:
            return first.value
        return None

    @cached_property
    def augmented(self) -> dict[Key, list[cst.AugAssign]]:
        """``total += term``: the augmented assignments to each variable
        (``values`` has its plain assignments only)."""
        found: dict[Key, list[cst.AugAssign]] = {}
        for node in subtrees.findall(self.module, m.AugAssign()):
            assert isinstance(node, cst.AugAssign)
            key = self.key(node.target)
            if key is not None:
                found.setdefault(key, []).append(node)
        return found

    @cached_property
    def loader_containers(self) -> set[Key]:
        """Variables holding a dict or list of data loaders
        (``loaders = {x: DataLoader(...) for x in ["train", "val"]}``,
        ``{"val": val_loader}``), parameters given one included, by this file's
        calls or by every call from the batch's other files (``train(model,
        loaders={"train": tl, "val": vl})``: kind "loaders", ``project_callers``)."""
        from .project_callers import given_by_callers

        handed = set(given_by_callers(self, "loaders"))
        return (
            self.tagged(
                lambda e: self._holds_loaders(e) or self.key(e) in handed,
                returns=True,
            )
            | handed
        )

    def _holds_loaders(self, expr: cst.BaseExpression | None) -> bool:
        """A dict, list or tuple display (or comprehension) of data loaders, or
        a call of a local module's function returning a dict of them (AM006
        prepares each where it is called)."""
        from .patterns import is_loader_seed, loader_dict_helper

        if expr is not None and loader_dict_helper(self, expr) is not None:
            return True
        if isinstance(expr, (cst.DictComp, cst.ListComp)):
            elements = [expr.value if isinstance(expr, cst.DictComp) else expr.elt]
        elif isinstance(expr, cst.Dict):
            elements = [
                e.value for e in expr.elements if isinstance(e, cst.DictElement)
            ]
        elif isinstance(expr, (cst.List, cst.Tuple)):
            elements = [e.value for e in expr.elements]
        else:
            return False
        return any(
            is_loader_seed(self, e) or self.holds_tagged(e, self._direct_loaders)
            for e in elements
        )

    def _loader_item(self, expr: cst.BaseExpression) -> bool:
        """``loaders["train"]``, ``loaders[phase]``: one loader of a container."""
        return isinstance(expr, cst.Subscript) and self.holds_tagged(
            expr.value, self.loader_containers
        )

    def loader_loop(self, iterable: cst.BaseExpression) -> tuple[bool, bool]:
        """Does a ``for`` over ``iterable`` step through a data loader? And is its first
        target an ``enumerate`` counter? (``enumerate``/``zip``/``tqdm`` see through.)
        """
        from .patterns import is_loader_seed

        if self.holds_tagged(iterable, self.loaders) or (
            # a helper module's own loaders are sharded by its callers, if at all
            not self.project.library_for
            and (is_loader_seed(self, iterable) or self._loader_item(iterable))
        ):
            return True, False
        if isinstance(iterable, cst.Call) and iterable.args:
            name = attr_chain(iterable.func) or ""
            qualnames = self.qualnames(iterable.func)
            if name in _LOOP_WRAPPERS or qualnames & _LOOP_QUALNAMES:
                positional = [arg.value for arg in iterable.args if arg.keyword is None]
                if any(self.loader_loop(arg)[0] for arg in positional):
                    return (
                        True,
                        name == "enumerate" or "builtins.enumerate" in qualnames,
                    )
        return False, False

    # -- training steps ----------------------------------------------------------------------
    def is_backward_call(self, node: cst.CSTNode) -> bool:
        """``loss.backward(...)`` on a tensor, or ``accel.backward(loss, ...)`` (not a
        user object's own ``backward``: ``self.backward()``, ``super().backward()``,
        or a call inside a method named ``backward``)."""
        if not isinstance(node, cst.Call):
            return False
        if self.is_runtime_call(node, "backward"):
            return True
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "backward"):
            return False
        receiver = func.value
        if isinstance(receiver, cst.Name) and receiver.value in {"self", "cls"}:
            return False
        if isinstance(receiver, cst.Call) and attr_chain(receiver.func) == "super":
            return False
        function = self.enclosing_function(node)
        return function is None or function.name.value != "backward"

    def runs_backward(self, node: cst.CSTNode) -> bool:
        """Does running ``node`` call a backward, directly or through local functions?"""
        return self._runs_backward(node, set())

    def _runs_backward(self, node: cst.CSTNode, seen: set[cst.FunctionDef]) -> bool:
        cached = self._backward_cache.get(node)
        if cached is not None:
            return cached
        found = False
        for call in _calls_run_by(node):
            if self.is_backward_call(call):
                found = True
                break
            target = self.callee(call)
            if target is not None and target[0] not in seen:
                seen.add(target[0])
                if self._runs_backward(target[0].body, seen):
                    found = True
                    break
        self._backward_cache[node] = found
        return found

    @cached_property
    def _backward_cache(self) -> dict[cst.CSTNode, bool]:
        return {}

    def loop_paths(self, node: cst.CSTNode) -> list[tuple[cst.For | cst.While, ...]]:
        """The chains of loops that run ``node``, innermost first: the loops around
        it in its function, then around each call of that function, and so on
        (each chain ends at module level or at a function nothing here calls)."""
        return self._loop_paths(node, frozenset())[:_MAX_PATHS]

    def _loop_paths(
        self, node: cst.CSTNode, seen: frozenset[cst.FunctionDef]
    ) -> list[tuple[cst.For | cst.While, ...]]:
        loops: list[cst.For | cst.While] = []
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
                loops.append(ancestor)
            if isinstance(ancestor, cst.FunctionDef):
                sites = self.call_sites(ancestor) if ancestor not in seen else []
                if not sites:
                    return [tuple(loops)]
                paths = []
                for site in sites:
                    for path in self._loop_paths(site, seen | {ancestor}):
                        paths.append((*loops, *path))
                        if len(paths) >= _MAX_PATHS:
                            return paths
                return paths
            child = ancestor
        return [tuple(loops)]

    def reads_loader(self, loop: cst.For | cst.While) -> bool:
        """Does each turn of ``loop`` take its data from a data loader: a ``for`` over
        one (or over a local generator that loops over one), or ``next(it)`` on a
        loader's iterator in its body?"""
        if isinstance(loop, cst.For):
            if self.loader_loop(loop.iter)[0]:
                return True
            if isinstance(loop.iter, cst.Call):
                target = self.callee(loop.iter)
                if target is not None and any(
                    isinstance(inner, cst.For) and self.loader_loop(inner.iter)[0]
                    for inner in _nodes_run_by(target[0].body)
                ):
                    return True
        for call in _calls_run_by(loop.body):
            if "builtins.next" in self.qualnames(call.func) and call.args:
                source = call.args[0].value
                if self.loader_loop(source)[0]:
                    return True
        return False

    def reads_no_data(self, loop: cst.For | cst.While) -> bool:
        """Is ``loop`` provably not stepping through a data source: a ``for`` over
        ``range(...)``, ``itertools.count()`` or a literal list (through
        ``enumerate``/``tqdm``), or a ``while``, that calls no ``next(...)``
        (MTAN's ``for k in range(train_batch): ... = next(train_dataset)`` over
        ``iter(train_loader)`` reads a loader)?"""
        if any(
            "builtins.next" in self.qualnames(call.func)
            for call in _calls_run_by(loop.body)
        ):
            return False
        return isinstance(loop, cst.While) or self._no_data(loop.iter, 0)

    def _no_data(self, iterable: cst.BaseExpression, depth: int) -> bool:
        if depth > 3:
            return False
        if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)):
            return True
        if isinstance(iterable, cst.Call):
            names = self.qualnames(iterable.func)
            if names & {"builtins.range", "itertools.count", "itertools.repeat"}:
                return True
            inner = self._loop_wrapped(iterable)
            if inner is not None:
                return self._no_data(inner, depth + 1)
            return False
        key = self.key(iterable) if isinstance(iterable, cst.Name) else None
        values = self.values.get(key, []) if key is not None else []
        return bool(values) and all(
            v is not None and self._no_data(v, depth + 1) for v in values
        )

    # -- divergence ------------------------------------------------------------------------
    @cached_property
    def divergence(self) -> Divergence:
        from .divergence import Divergence

        return Divergence(self)

    @cached_property
    def returned_losses(self) -> ReturnedLosses:
        """Functions that return a loss they backpropagate, and the callers'
        variables that hold it (see ``returned_loss``)."""
        from .returned_loss import ReturnedLosses

        return ReturnedLosses(self)

    def uniform(self, node: cst.CSTNode) -> bool:
        """True when every rank reaches ``node`` together (a collective is safe there)."""
        return self.divergence.uniform(node)


_MAX_PATHS = 32


def _returned_values(function: cst.FunctionDef) -> list[cst.BaseExpression | None]:
    """What each ``return`` of ``function``'s own body hands back (None: a bare
    ``return``); empty for a function without one."""
    return [
        node.value
        for node in _nodes_run_by(function.body)
        if isinstance(node, cst.Return)
    ]


def _nodes_run_by(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes under ``node`` that run when it runs: not the bodies of the
    functions, classes and lambdas it defines."""
    shared = subtrees.nodes_run_by(node)
    if shared is not None:
        return shared
    walk = _RunBy(node)
    node.visit(walk)
    return walk.found


class _RunBy(cst.CSTVisitor):
    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.found: list[cst.CSTNode] = []

    def on_visit(self, inner: cst.CSTNode) -> bool:
        if inner is not self.root and isinstance(
            inner, (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        ):
            return False
        self.found.append(inner)
        return True


def _calls_run_by(node: cst.CSTNode) -> list[cst.Call]:
    return [n for n in _nodes_run_by(node) if isinstance(n, cst.Call)]


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    return [
        *params.posonly_params,
        *params.params,
        *params.kwonly_params,
        *([params.star_arg] if isinstance(params.star_arg, cst.Param) else []),
        *([params.star_kwarg] if params.star_kwarg else []),
    ]


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
    for statement in body:
        if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
            return statement
    return None


def bind_arguments(
    function: cst.FunctionDef, bound: int, call: cst.Call
) -> Iterator[tuple[str, cst.BaseExpression]]:
    positional = [*function.params.posonly_params, *function.params.params][bound:]
    by_name = {p.name.value for p in _all_params(function.params)}
    index = 0
    for arg in call.args:
        if arg.star:
            return  # *args / **kwargs: positions are unknown from here on
        if arg.keyword is None:
            if index < len(positional):
                yield positional[index].name.value, arg.value
            index += 1
        elif arg.keyword.value in by_name:
            yield arg.keyword.value, arg.value


def _unpacked(
    target: cst.Tuple | cst.List, value: cst.BaseExpression | None
) -> list[cst.BaseExpression | None]:
    """What each element of ``a, b = value`` receives: the items of a tuple or list
    display of the same length without ``*`` (``enc, dec = Enc(), Dec()``), else
    unknown (None) for each."""
    if (
        isinstance(value, (cst.Tuple, cst.List))
        and len(value.elements) == len(target.elements)
        and not any(isinstance(e, cst.StarredElement) for e in value.elements)
        and not any(isinstance(e, cst.StarredElement) for e in target.elements)
    ):
        return [e.value for e in value.elements]
    return [None] * len(target.elements)


class _Collector(cst.CSTVisitor):
    def __init__(self, index: ModuleIndex) -> None:
        super().__init__()
        self.index = index
        self.values: dict[Key, list[cst.BaseExpression | None]] = defaultdict(list)
        self.unpacked: dict[Key, list[tuple[cst.BaseExpression, int, int]]] = (
            defaultdict(list)
        )
        self.functions: list[cst.FunctionDef] = []
        self.classes: list[cst.ClassDef] = []
        self.calls: list[cst.Call] = []
        self.for_loops: list[cst.For] = []
        self.match_captures: set[str] = set()
        self.star_import = False

    def _bind_target(
        self, target: cst.BaseExpression, value: cst.BaseExpression | None
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            values = _unpacked(target, value)
            plain = not any(isinstance(e, cst.StarredElement) for e in target.elements)
            for position, (element, item) in enumerate(
                zip(target.elements, values, strict=True)
            ):
                self._bind_target(element.value, item)
                inner = self.index.key(element.value)
                if item is None and value is not None and plain and inner is not None:
                    self.unpacked[inner].append((value, position, len(target.elements)))
            return
        key = self.index.key(target)
        if key is not None:
            self.values[key].append(value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._bind_target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind_target(node.target, node.value)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        # `with tqdm(loader) as pbar:` binds what `pbar = tqdm(loader)` would (a
        # bar's __enter__ returns the bar): a loop over `pbar` is a loader loop.
        # Only bars: other context managers may enter as something else.
        if (
            node.asname is not None
            and isinstance(node.item, cst.Call)
            and not self.index.qualnames(node.item.func).isdisjoint(TQDM_CALLS)
        ):
            self._bind_target(node.asname.name, node.item)  # type: ignore[arg-type]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_For(self, node: cst.For) -> None:
        self.for_loops.append(node)

    def visit_ImportStar(self, node: cst.ImportStar) -> None:
        self.star_import = True

    def visit_MatchAs(self, node: cst.MatchAs) -> None:
        if node.name is not None:
            self.match_captures.add(node.name.value)

    def visit_MatchStar(self, node: cst.MatchStar) -> None:
        if node.name is not None:
            self.match_captures.add(node.name.value)

    def visit_MatchMapping(self, node: cst.MatchMapping) -> None:
        if node.rest is not None:
            self.match_captures.add(node.rest.value)
