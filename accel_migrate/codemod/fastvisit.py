"""A read-only visit for libcst's ``CSTVisitor``: the same callbacks, in the same
order, without building a copy of the tree.

libcst visits every node through ``_visit_and_replace_children``, which builds
(and validates) a new node from the visited children even for a visitor, whose
result is then thrown away. Every analysis the engine runs is such a visitor
(libcst's scopes and expression contexts, the module index, the screen,
``matchers.findall``), so on a training script about half of a visit went to
building copies nobody reads.

``install()`` replaces ``CSTNode.visit`` by one that, for a ``CSTVisitor``, walks
each node's fields in the order libcst visits them (recorded once per node
class from libcst's own ``_visit_and_replace_children``) and makes the same
``on_visit`` / ``on_visit_attribute`` / ``on_leave_attribute`` / ``on_leave``
calls; a transformer takes libcst's own path. Looking up a visitor's
``visit_<Node>`` hook once per visitor class and node class (where the visitor
keeps libcst's default dispatch) removes the rest of the per-node cost. libcst's
batched visitor (the metadata providers) gets its functions per node class looked
up once, and its scope visitor's ``on_leave`` the same answers without an ABC
``isinstance`` per node. A test compares every callback with libcst's, on every
fixture, and the scopes they compute.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType
from typing import Any

import libcst as cst
from libcst._batched_visitor import _BatchedCSTVisitor
from libcst.metadata import scope_provider as _scope_provider
from libcst.metadata import wrapper as _wrapper

from . import node_kinds

_CSTNode = cst.CSTNode
_CSTVisitor = cst.CSTVisitor
_ORIGINAL_VISIT = cst.CSTNode.visit
_MAYBE = cst.MaybeSentinel.DEFAULT

#: Node classes whose ``_visit_and_replace_children`` skips a field's callbacks
#: when it is None (``format_spec``): those keep libcst's path for the node itself.
_CONDITIONAL = frozenset(
    getattr(cst, name)
    for name in ("FormattedStringExpression", "TemplatedStringExpression")
    if hasattr(cst, name)
)

#: Per node class: the fields libcst visits, in its order (None: libcst's path).
_FIELDS: dict[type, tuple[str, ...] | None] = {}


class _Recorder(_CSTVisitor):
    """Records the fields one node's ``_visit_and_replace_children`` visits."""

    def __init__(self, target: cst.CSTNode) -> None:
        super().__init__()
        self.target = target
        self.fields: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        pass

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if node is self.target:
            self.fields.append(attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        pass


def _hooked(visitor_class: type) -> int | None:
    """The ``node_kinds`` bits of the node classes ``visitor_class`` defines a
    ``visit_<Node>`` or ``leave_<Node>`` for; None where it may define an
    attribute hook. Read from the classes' own namespaces, not ``dir()``: an
    analysis makes a visitor class per call."""
    mask = node_kinds.UNKNOWN
    for klass in visitor_class.__mro__:
        if klass in _CSTVisitor.__mro__:
            continue
        # A snapshot: another thread (the soundness harness migrates cases in
        # threads) may set a class attribute meanwhile, and iterating the live
        # namespace would raise 'dictionary changed size during iteration'.
        for name in tuple(klass.__dict__):
            if not name.startswith(("visit_", "leave_")):
                continue
            node, _, field = name.partition("_")[2].partition("_")
            bit = node_kinds.BY_NAME.get(node)
            if bit is None:
                continue
            if field:
                return None  # an attribute hook: every node's fields are called
            mask |= bit
    return mask


def _fields(node: cst.CSTNode) -> tuple[str, ...] | None:
    kind = type(node)
    try:
        return _FIELDS[kind]
    except KeyError:
        pass
    if kind in _CONDITIONAL:
        fields = None
    else:
        recorder = _Recorder(node)
        node._visit_and_replace_children(recorder)
        fields = tuple(recorder.fields)
    _FIELDS[kind] = fields
    return fields


Hook = Callable[..., Any] | None
#: libcst's do-nothing ``visit_<Node>`` / ``visit_<Node>_<field>`` methods, which
#: every visitor inherits: a hook that is one of them is no hook.
_TYPED = cst.CSTVisitor.__mro__[1:]


def _inherited_no_op(visitor_class: type, name: str, hook: Any) -> bool:
    for base in _TYPED:
        if name in base.__dict__:
            return base.__dict__[name] is hook
    return False


class _Dispatch:
    """How to call one visitor class's hooks: resolved once per node class when the
    class keeps libcst's default ``on_visit``/``on_leave``/attribute dispatch (which
    looks ``visit_<Node>`` up by name on every call)."""

    def __init__(self, visitor_class: type) -> None:
        base = _CSTVisitor
        self.visitor_class = visitor_class
        self.default_visit = visitor_class.on_visit is base.on_visit
        self.default_leave = visitor_class.on_leave is base.on_leave
        self.default_attributes = (
            visitor_class.on_visit_attribute is base.on_visit_attribute
            and visitor_class.on_leave_attribute is base.on_leave_attribute
        )
        self.batched = visitor_class is _BatchedCSTVisitor
        self.visit_hooks: dict[type, Hook] = {}
        self.leave_hooks: dict[type, Hook] = {}
        #: Per node class: whether any attribute hook may exist for it.
        self.attribute_hooks: dict[type, bool] = {}
        #: Per node class: what ``_walk`` needs (``_entry``).
        self.entries: dict[type, Entry] = {}
        #: The node classes with a hook (``node_kinds`` bits): a subtree with none
        #: of them makes no callback and is not entered. None: any node may.
        self.hooked: int | None = None
        if (
            self.default_visit
            and self.default_leave
            and self.default_attributes
            and not self.batched
        ):
            self.hooked = _hooked(visitor_class)

    def _lookup(self, name: str) -> Hook:
        hook = getattr(self.visitor_class, name, None)
        if hook is None or _inherited_no_op(self.visitor_class, name, hook):
            return None
        if isinstance(hook, FunctionType):
            return hook
        # A staticmethod, a callable object...: looked up on the visitor each time.
        return lambda visitor, node: getattr(visitor, name)(node)

    def visit_hook(self, kind: type) -> Hook:
        try:
            return self.visit_hooks[kind]
        except KeyError:
            hook = self.visit_hooks[kind] = self._lookup(f"visit_{kind.__name__}")
            return hook

    def leave_hook(self, kind: type) -> Hook:
        try:
            return self.leave_hooks[kind]
        except KeyError:
            hook = self.leave_hooks[kind] = self._lookup(f"leave_{kind.__name__}")
            return hook

    def has_attribute_hooks(
        self, kind: type, fields: tuple[str, ...], visitor: Any
    ) -> bool:
        if self.batched:
            return kind.__name__ in _batched_attribute_types(visitor)
        if not self.default_attributes:
            return True
        try:
            return self.attribute_hooks[kind]
        except KeyError:
            found = any(
                self._lookup(f"{prefix}_{kind.__name__}_{name}") is not None
                for name in fields
                for prefix in ("visit", "leave")
            )
            self.attribute_hooks[kind] = found
            return found


def _batched_attribute_types(visitor: Any) -> frozenset[str]:
    """Node type names a batched visitor has ``visit_<Node>_<field>`` hooks for
    (kept on the visitor: one batch, one tree)."""
    names = visitor.__dict__.get("_fastvisit_attribute_types")
    if names is None:
        names = visitor._fastvisit_attribute_types = frozenset(
            key.split("_", 2)[1]
            for key in visitor.visitor_methods
            if key.count("_") >= 2 and key.startswith(("visit_", "leave_"))
        )
    return names


def _dispatch(visitor: Any) -> _Dispatch:
    # Kept on the class itself (not in a table): a visitor class defined inside a
    # function is a new class per call, and goes away with its dispatch.
    kind = type(visitor)
    found = kind.__dict__.get("_fastvisit_dispatch")
    if found is None:
        found = _Dispatch(kind)
        kind._fastvisit_dispatch = found  # type: ignore[attr-defined]
    return found


#: An entry's hook that says "call the visitor's own on_visit / on_leave".
_OWN = object()
#: Per node class (in a _Dispatch's ``entries``): the visit hook (None: none,
#: _OWN: ``on_visit``), the leave hook (likewise), the fields (None: libcst's
#: path) and whether attribute callbacks are made (None: ask the batched visitor).
Entry = tuple[Any, Any, tuple[str, ...] | None, bool | None]


def _entry(dispatch: _Dispatch, node: cst.CSTNode) -> Entry:
    kind = type(node)
    visit = dispatch.visit_hook(kind) if dispatch.default_visit else _OWN
    leave = dispatch.leave_hook(kind) if dispatch.default_leave else _OWN
    fields = _fields(node)
    attributes: bool | None
    if fields is None:
        attributes = False
    elif dispatch.batched:
        attributes = None
    else:
        attributes = dispatch.has_attribute_hooks(kind, fields, None)
    entry = dispatch.entries[kind] = (visit, leave, fields, attributes)
    return entry


def _walk(node: cst.CSTNode, visitor: Any, dispatch: _Dispatch) -> None:
    # The hot loop of every analysis: one dict lookup per node, no isinstance
    # against libcst's abstract classes (slow), recursion inlined for fields.
    hooked = dispatch.hooked
    if hooked is not None:
        table = node_kinds._MASKS  # None: not ``active()``, no pruning
        if table is not None:
            # mask_of's own cache lookup, inlined: this runs for every node.
            found = table.get(id(node))
            mask = found[0] if found is not None else node_kinds.mask_of(node, _fields)
            if not mask & hooked:
                return  # no hook anywhere below
    kind = type(node)
    entry = dispatch.entries.get(kind)
    if entry is None:
        entry = _entry(dispatch, node)
    visit, leave, fields, attributes = entry
    if visit is None:
        go = True
    elif visit is _OWN:
        go = visitor.on_visit(node)
    else:
        go = visit(visitor, node) is not False
    if go:
        if fields is None:
            # libcst's own path for this node; its children come back here.
            node._visit_and_replace_children(visitor)
        else:
            if attributes is None:
                attributes = kind.__name__ in _batched_attribute_types(visitor)
            for name in fields:
                if attributes:
                    visitor.on_visit_attribute(node, name)
                value = getattr(node, name)
                # None or MaybeSentinel: libcst makes the attribute calls only.
                if value is not None and value is not _MAYBE:
                    if type(value) is tuple or type(value) is list:
                        for item in value:
                            _walk(item, visitor, dispatch)
                    else:
                        _walk(value, visitor, dispatch)
                if attributes:
                    visitor.on_leave_attribute(node, name)
    if leave is _OWN:
        visitor.on_leave(node)
    elif leave is not None:
        leave(visitor, node)


#: Per node class, for one batched visitor: its visit functions, its leave
#: functions, and the fields with their attribute functions (None: libcst's path).
BatchedEntry = tuple[
    tuple[Any, ...],
    tuple[Any, ...],
    tuple[tuple[str, tuple[Any, ...], tuple[Any, ...]], ...] | None,
]


def _batched_entry(visitor: Any, node: cst.CSTNode) -> BatchedEntry:
    """What libcst's ``_BatchedCSTVisitor.on_visit`` / ``on_leave`` /
    ``on_visit_attribute`` / ``on_leave_attribute`` would look up for ``node``'s
    class, looked up once (kept on the visitor: its functions are bound to one
    batch of providers)."""
    methods = visitor.visitor_methods
    name = type(node).__name__
    fields = _fields(node)
    attributes = None
    if fields is not None:
        attributes = tuple(
            (
                field,
                tuple(methods.get(f"visit_{name}_{field}", ())),
                tuple(methods.get(f"leave_{name}_{field}", ())),
            )
            for field in fields
        )
    entry = (
        tuple(methods.get(f"visit_{name}", ())),
        tuple(methods.get(f"leave_{name}", ())),
        attributes,
    )
    visitor._fastvisit_batched[type(node)] = entry
    return entry


def _walk_batched(node: cst.CSTNode, visitor: Any, table: dict[type, Any]) -> None:
    # libcst's metadata providers (scopes, expression contexts) run as one batched
    # visitor: the same functions in the same order as its on_visit / on_leave
    # and attribute callbacks, without a lookup by name per node and call.
    entry = table.get(type(node))
    if entry is None:
        entry = _batched_entry(visitor, node)
    visits, leaves, attributes = entry
    for function in visits:
        function(node)
    if attributes is None:
        node._visit_and_replace_children(visitor)
    else:
        for name, before, after in attributes:
            for function in before:
                function(node)
            value = getattr(node, name)
            if value is not None and value is not _MAYBE:
                if type(value) is tuple or type(value) is list:
                    for item in value:
                        _walk_batched(item, visitor, table)
                else:
                    _walk_batched(value, visitor, table)
            for function in after:
                function(node)
    for function in leaves:
        function(node)


def _visit(self: cst.CSTNode, visitor: Any) -> Any:
    if type(visitor) is _BatchedCSTVisitor and (
        visitor.before_visit is None and visitor.after_leave is None
    ):
        table = visitor.__dict__.get("_fastvisit_batched")
        if table is None:
            table = visitor._fastvisit_batched = {}
        _walk_batched(self, visitor, table)
        return self
    if isinstance(visitor, _CSTVisitor):
        _walk(self, visitor, _dispatch(visitor))
        return self
    return _ORIGINAL_VISIT(self, visitor)


_ScopeVisitor = _scope_provider.ScopeVisitor
_ORIGINAL_SCOPE_LEAVE = _ScopeVisitor.on_leave
#: Per node class: is it one of the scope visitor's assignment-like nodes?
_ASSIGNMENT_LIKE: dict[type, bool] = {}


def _scope_leave(self: Any, original_node: cst.CSTNode) -> None:
    """libcst's ``ScopeVisitor.on_leave``, with its ``isinstance`` against 15 node
    classes (an ABC check each) and its ``leave_<Node>`` lookup by name answered
    once per node class: it runs for every node of every scope computation."""
    self.provider.set_metadata(original_node, self.scope)
    kind = type(original_node)
    assignment = _ASSIGNMENT_LIKE.get(kind)
    if assignment is None:
        assignment = _ASSIGNMENT_LIKE[kind] = isinstance(
            original_node, _scope_provider._ASSIGNMENT_LIKE_NODES
        )
    if assignment:
        self.scope._assignment_count += 1
    # CSTVisitor.on_leave: the visitor's leave_<Node>, where it has its own.
    leave = _dispatch(self).leave_hook(kind)
    if leave is not None:
        leave(self, original_node)


_ORIGINAL_GEN_BATCHABLE = _wrapper._gen_batchable


def _gen_batchable(wrapper: Any, providers: Any) -> Any:
    """libcst's, less its walk over the whole tree for an empty batch: resolving
    a provider that is not batchable (the engine's scopes and parents) ran one
    batched visit with no provider in it after computing it."""
    providers = list(providers)
    if not providers:
        return {}
    return _ORIGINAL_GEN_BATCHABLE(wrapper, providers)


def install() -> None:
    """Use the read-only visit for every ``CSTVisitor`` in this process."""
    cst.CSTNode.visit = _visit  # type: ignore[method-assign]
    _ScopeVisitor.on_leave = _scope_leave  # type: ignore[method-assign]
    _wrapper._gen_batchable = _gen_batchable


def uninstall() -> None:
    cst.CSTNode.visit = _ORIGINAL_VISIT  # type: ignore[method-assign]
    _ScopeVisitor.on_leave = _ORIGINAL_SCOPE_LEAVE  # type: ignore[method-assign]
    _wrapper._gen_batchable = _ORIGINAL_GEN_BATCHABLE
