"""The one walk behind ``scopes.ScopeProvider``.

It makes libcst's scope visitor's records in libcst's order (the order decides
which bindings a read sees: ``x = x + 1`` reads the earlier ``x``), without
libcst's ``ExpressionContextProvider``: a name is stored when it sits, through
tuples, lists, stars and parentheses only, in an assignment's, ``for``'s,
comprehension's, walrus's or ``as``'s target (what that provider marks STORE).
libcst asks for the qualified names of every call and subscript while it walks,
to find ``typing.cast`` / ``TypeVar`` / ``Literal`` (whose string arguments it
then reads as annotations); here only once the walk has seen a binding that can
give a name starting with ``typing`` (an import of typing, a name ``typing``).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import scope_provider as _libcst

from .fastvisit import _fields
from .scopes import (
    Access,
    AnnotationScope,
    ClassScope,
    ComprehensionScope,
    FunctionScope,
    GlobalScope,
    LocalScope,
    Scope,
)

_MAYBE = cst.MaybeSentinel.DEFAULT
_ASSIGNMENT_LIKE = frozenset(_libcst._ASSIGNMENT_LIKE_NODES)
_TYPING = frozenset({"typing", "typing_extensions"})
#: Fields of a node that hold a stored target (everything else under the node is
#: read); Attribute and Subscript read all of theirs (``a.b = 1`` reads ``a``).
_STORE_FIELDS: dict[type, frozenset[str]] = {
    cst.AssignTarget: frozenset({"target"}),
    cst.AnnAssign: frozenset({"target"}),
    cst.AugAssign: frozenset({"target"}),
    cst.NamedExpr: frozenset({"target"}),
    cst.AsName: frozenset({"name"}),
    cst.CompFor: frozenset({"target"}),
    cst.Del: frozenset(),
    cst.Attribute: frozenset(),
    cst.Subscript: frozenset(),
}
Deferred = tuple[Access, "cst.Attribute | None", "cst.BaseString | None"]


class ScopeWalk:
    """Records every node's scope into ``computed`` and builds the scopes."""

    def __init__(self, computed: MutableMapping[cst.CSTNode, Any]) -> None:
        self.computed = computed
        self.scope: Scope = GlobalScope()
        self.deferred: list[Deferred] = []
        self.top_attribute: list[cst.Attribute | None] = [None]
        self.in_annotation: list[bool] = [False]
        self.in_type_hint: list[bool] = [False]
        self.ignored_subscripts: set[cst.Subscript] = set()
        self.last_string: cst.BaseString | None = None
        #: Could a qualified name start with ``typing`` yet?
        self.typing = False

    def run(self, module: cst.Module) -> None:
        self.visit(module, False)
        self.infer_accesses()

    # -- the walk -----------------------------------------------------------------------
    def visit(self, node: cst.CSTNode, store: bool) -> None:
        kind = type(node)
        handler = _HANDLERS.get(kind)
        if handler is None:
            self.children(node, store)
        else:
            handler(self, node, store)
        scope = self.scope
        self.computed[node] = scope
        if kind in _ASSIGNMENT_LIKE:
            scope._assignment_count += 1

    def children(self, node: cst.CSTNode, store: bool) -> None:
        kind = type(node)
        try:
            fields = _KIND_FIELDS[kind]
        except KeyError:
            fields = _KIND_FIELDS[kind] = _fields(node)
            if fields == () and kind not in _ASSIGNMENT_LIKE:
                _LEAVES.add(kind)  # only generic nodes come here: no hook
        if fields is None:
            for child in node.children:
                self.visit(child, store)
            return
        stored = _STORE_FIELDS.get(kind)
        visit = self.visit
        computed = self.computed
        scope = self.scope
        for name in fields:
            value = getattr(node, name)
            if value is None or value is _MAYBE:
                continue
            here = store if stored is None else name in stored
            if type(value) is tuple or type(value) is list:
                for item in value:
                    if type(item) in _LEAVES:
                        computed[item] = scope
                    else:
                        visit(item, here)
            elif type(value) in _LEAVES:
                # A node without children, hook or binding (whitespace, a
                # comma, an operator): libcst's visitor only records its scope.
                computed[value] = scope
            else:
                visit(value, here)

    def assign(self, name: str, node: cst.CSTNode) -> None:
        if name in _TYPING:
            self.typing = True
        self.scope.record_assignment(name, node)

    def qualified(self, node: cst.CSTNode) -> set[str]:
        """libcst's qualified names of ``node`` at this point of the walk (only
        the ``typing`` ones matter; none can exist before ``self.typing``)."""
        if not self.typing:
            return set()
        return {q.name for q in self.scope.get_qualified_names_for(node)}

    # -- libcst's ScopeVisitor hooks ------------------------------------------------------
    def _import(self, node: cst.Import | cst.ImportFrom, store: bool) -> None:
        names = node.names
        if isinstance(names, cst.ImportStar):
            return
        if isinstance(node, cst.ImportFrom) and node.module is not None:
            module = get_full_name_for_node(node.module) or ""
            if module.split(".")[0] in _TYPING:
                self.typing = True
        scope = self.scope
        for alias in names:
            self.computed[alias] = scope
            asname = alias.asname
            if asname is not None:
                target = cst.ensure_type(asname.name, cst.Name)
                dotted = _libcst._gen_dotted_names(target)
                bound: cst.CSTNode = asname.name
            else:
                dotted = _libcst._gen_dotted_names(alias.name)
                bound = alias.name
            real = get_full_name_for_node(alias.name) or ""
            if real.split(".")[0] in _TYPING:
                self.typing = True
            for name, _ in dotted:
                if name.split(".")[0] in _TYPING:
                    self.typing = True
                scope.record_import_assignment(name, node, bound)

    def _attribute(self, node: cst.Attribute, store: bool) -> None:
        top = self.top_attribute
        if top[-1] is None:
            top[-1] = node
        self.visit(node.value, False)
        if top[-1] is node:
            top[-1] = None

    def _call(self, node: cst.Call, store: bool) -> None:
        self.top_attribute.append(None)
        self.in_type_hint.append(False)
        qnames = self.qualified(node)
        if "typing.NewType" in qnames or "typing.TypeVar" in qnames:
            self.visit(node.func, False)
            self.in_type_hint[-1] = True
            for arg in node.args[1:]:
                self.visit(arg, False)
        elif "typing.cast" in qnames:
            self.visit(node.func, False)
            if node.args:
                self.in_type_hint.append(True)
                self.visit(node.args[0], False)
                self.in_type_hint.pop()
                for arg in node.args[1:]:
                    self.visit(arg, False)
        else:
            self.children(node, False)
        self.top_attribute.pop()
        self.in_type_hint.pop()

    def _annotation(self, node: cst.Annotation, store: bool) -> None:
        self.in_annotation.append(True)
        self.children(node, store)
        self.in_annotation.pop()

    def _simple_string(self, node: cst.SimpleString, store: bool) -> None:
        self._string_annotation(node)

    def _concatenated_string(self, node: cst.ConcatenatedString, store: bool) -> None:
        if not self._string_annotation(node):
            self.children(node, store)

    def _string_annotation(
        self, node: cst.SimpleString | cst.ConcatenatedString
    ) -> bool:
        if not (self.in_type_hint[-1] or self.in_annotation[-1]) or (
            self.ignored_subscripts
        ):
            return False
        value = node.evaluated_value
        if not value:
            return False
        top = self.last_string is None
        if top:
            self.last_string = node
        try:
            module = cst.parse_module(value)
            self.visit(module, False)
        except cst.ParserSyntaxError:
            pass
        if top:
            self.last_string = None
        return True

    def _subscript(self, node: cst.Subscript, store: bool) -> None:
        in_type_hint = False
        if isinstance(node.value, cst.Name):
            qnames = self.qualified(node.value)
            if any(q.startswith(("typing.", "typing_extensions.")) for q in qnames):
                in_type_hint = True
            if "typing.Literal" in qnames or "typing_extensions.Literal" in qnames:
                self.ignored_subscripts.add(node)
        self.in_type_hint.append(in_type_hint)
        self.children(node, False)
        self.in_type_hint.pop()
        self.ignored_subscripts.discard(node)

    def _name(self, node: cst.Name, store: bool) -> None:
        # A name in a string read as an annotation has no expression context in
        # libcst (its provider never saw that module): a read, whatever it is.
        if store and self.last_string is None:
            self.assign(node.value, node)
        else:
            access = Access(node, self.scope)
            self.deferred.append((access, self.top_attribute[-1], self.last_string))
        if node.lpar:  # libcst's visitor goes on into the parentheses
            self.children(node, store)

    def _function_def(self, node: cst.FunctionDef, store: bool) -> None:
        self.assign(node.name.value, node)
        outer = self.scope
        self.computed[node.name] = outer
        if node.type_parameters:
            self.scope = AnnotationScope(outer, node, None)
            self.visit(node.type_parameters, False)
        around = self.scope
        self.scope = FunctionScope(around, node, node.name.value)
        self.visit(node.params, False)
        self.visit(node.body, False)
        self.scope = around
        for decorator in node.decorators:
            self.visit(decorator, False)
        if node.returns:
            self.visit(node.returns, False)
        self.scope = outer

    def _lambda(self, node: cst.Lambda, store: bool) -> None:
        outer = self.scope
        self.scope = FunctionScope(outer, node, None)
        self.visit(node.params, False)
        self.visit(node.body, False)
        self.scope = outer

    def _param(self, node: cst.Param, store: bool) -> None:
        scope = self.scope
        self.assign(node.name.value, node)
        self.computed[node.name] = scope
        self.scope = scope.parent
        for field in (node.default, node.annotation):
            if field:
                self.visit(field, False)
        self.scope = scope

    def _arg(self, node: cst.Arg, store: bool) -> None:
        if node.value:
            self.visit(node.value, False)

    def _class_def(self, node: cst.ClassDef, store: bool) -> None:
        self.assign(node.name.value, node)
        outer = self.scope
        self.computed[node.name] = outer
        for decorator in node.decorators:
            self.visit(decorator, False)
        if node.type_parameters:
            self.scope = AnnotationScope(outer, node, None)
            self.visit(node.type_parameters, False)
        for base in node.bases:
            self.visit(base, False)
        for keyword in node.keywords:
            self.visit(keyword, False)
        self.scope = ClassScope(self.scope, node, node.name.value)
        for statement in node.body.body:
            self.visit(statement, False)
        self.scope = outer

    def _global(self, node: cst.Global, store: bool) -> None:
        scope = self.scope
        if isinstance(scope, LocalScope):
            for item in node.names:
                scope._overwrites[item.name.value] = scope.globals

    def _nonlocal(self, node: cst.Nonlocal, store: bool) -> None:
        scope = self.scope
        if not isinstance(scope, LocalScope):
            raise NotImplementedError(
                "nonlocal declaration not allowed at module level"
            )
        for item in node.names:
            scope._overwrites[item.name.value] = scope.parent

    def _comprehension(self, node: Any, store: bool) -> None:
        for_in = node.for_in
        self.visit(for_in.iter, False)
        outer = self.scope
        self.computed[for_in] = outer
        self.scope = ComprehensionScope(outer, node, None)
        self.visit(for_in.target, True)
        self.scope._assignment_count += 1
        for condition in for_in.ifs:
            self.visit(condition, False)
        if for_in.inner_for_in:
            self.visit(for_in.inner_for_in, False)
        if isinstance(node, cst.DictComp):
            self.visit(node.key, False)
            self.visit(node.value, False)
        else:
            self.visit(node.elt, False)
        self.scope = outer

    def _for(self, node: cst.For, store: bool) -> None:
        self.visit(node.target, True)
        self.scope._assignment_count += 1
        for child in (node.iter, node.body, node.orelse, node.asynchronous):
            if child is not None:
                self.visit(child, False)

    def _type_alias(self, node: Any, store: bool) -> None:
        self.assign(node.name.value, node)
        outer = self.scope
        self.scope = AnnotationScope(outer, node, None)
        if node.type_parameters is not None:
            self.visit(node.type_parameters, False)
        self.visit(node.value, False)
        self.scope = outer

    def _type_var(self, node: Any, store: bool) -> None:
        self.assign(node.name.value, node)
        if getattr(node, "bound", None) is not None:
            self.visit(node.bound, False)

    # -- after the walk: what each read sees (libcst's ScopeVisitor.infer_accesses) ------
    def infer_accesses(self) -> None:
        by_name: dict[tuple[Scope, str], dict[Access, None]] = {}
        dotted: dict[cst.Attribute, list[tuple[str, cst.CSTNode]]] = {}
        for access, attribute, string in self.deferred:
            name = access.node.value  # type: ignore[attr-defined]
            if attribute is not None:
                names = dotted.get(attribute)
                if names is None:
                    names = dotted[attribute] = list(
                        _libcst._gen_dotted_names(attribute)
                    )
                for attr_name, node in names:
                    if attr_name in access.scope:
                        access.node = node
                        name = attr_name
                        break
            if string is not None:
                access.node = string
            by_name.setdefault((access.scope, name), {})[access] = None
            access.record_assignments(name)
            access.scope.record_access(access)
        for (scope, name), accesses in by_name.items():
            for assignment in list(scope._resolve_scope_for_access(name, scope)):
                assignment.record_accesses(accesses)
        self.deferred = []


_HANDLERS: dict[type, Callable[[ScopeWalk, Any, bool], None]] = {
    cst.Import: ScopeWalk._import,
    cst.ImportFrom: ScopeWalk._import,
    cst.Attribute: ScopeWalk._attribute,
    cst.Call: ScopeWalk._call,
    cst.Annotation: ScopeWalk._annotation,
    cst.SimpleString: ScopeWalk._simple_string,
    cst.ConcatenatedString: ScopeWalk._concatenated_string,
    cst.Subscript: ScopeWalk._subscript,
    cst.Name: ScopeWalk._name,
    cst.FunctionDef: ScopeWalk._function_def,
    cst.Lambda: ScopeWalk._lambda,
    cst.Param: ScopeWalk._param,
    cst.Arg: ScopeWalk._arg,
    cst.ClassDef: ScopeWalk._class_def,
    cst.Global: ScopeWalk._global,
    cst.Nonlocal: ScopeWalk._nonlocal,
    cst.ListComp: ScopeWalk._comprehension,
    cst.SetComp: ScopeWalk._comprehension,
    cst.DictComp: ScopeWalk._comprehension,
    cst.GeneratorExp: ScopeWalk._comprehension,
    cst.For: ScopeWalk._for,
}
#: Per node class: the fields libcst visits (None: ask the node for children).
_KIND_FIELDS: dict[type, tuple[str, ...] | None] = {}
#: Node classes without fields to visit, hooks or bindings.
_LEAVES: set[type] = set()
for _kind, _handler in (
    ("TypeAlias", ScopeWalk._type_alias),
    ("TypeVar", ScopeWalk._type_var),
    ("TypeVarTuple", ScopeWalk._type_var),
    ("ParamSpec", ScopeWalk._type_var),
):
    if hasattr(cst, _kind):
        _HANDLERS[getattr(cst, _kind)] = _handler
