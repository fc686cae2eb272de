"""A transformer walk that rebuilds only the nodes on a changed path.

libcst's ``CSTNode.visit`` rebuilds (and validates) every node of the tree for a
``CSTTransformer``, also where the transformer changes nothing: each rule's pass
copied the whole module. ``transform`` makes the same ``on_visit`` /
``on_visit_attribute`` / ``on_leave_attribute`` / ``on_leave`` calls in the same
order (the fields of each node class, and how each is visited, are read once from
libcst's own ``_visit_and_replace_children``), with libcst's handling of
``RemovalSentinel``, ``FlattenSentinel`` and ``MaybeSentinel``. What differs:

- where no field of a node changed, the node is not rebuilt: ``updated_node`` is
  the original node object (libcst does this too where ``visit_`` returns False),
  and a leave hook that hands it back keeps the original in the new tree;
- a hook the transformer's class does not define is not called (the dispatch is
  looked up once per class and node class).

So the tree after a pass shares its unchanged subtrees with the tree before it. A
pass that puts an original node into a second place (``accel.f(x)`` built from
an ``x`` that also stays where it was) would leave one node object twice in the
new tree, and metadata (positions, parents, scopes) is keyed by node:
``unique_nodes`` gives each repeated occurrence its own copy, as libcst's rebuild
did. A test compares the callbacks and the output with libcst's, on every fixture.
"""

from __future__ import annotations

import linecache
import re
import textwrap
from collections.abc import Callable
from types import FunctionType
from typing import Any

import libcst as cst

from . import node_kinds

#: Off: ``Rule.run`` takes libcst's own ``visit`` (for comparisons and benchmarks).
ENABLED = True

_CSTNode = cst.CSTNode
_Transformer = cst.CSTTransformer
_Removal = cst.RemovalSentinel
_Flatten = cst.FlattenSentinel
_Maybe = cst.MaybeSentinel
_MAYBE = cst.MaybeSentinel.DEFAULT

#: How libcst visits a field (``libcst._nodes.internal``'s helpers), and two
#: fields whose helper depends on the value.
REQUIRED, OPTIONAL, SENTINEL, SEQUENCE, BODY = "R", "O", "S", "Q", "B"
FORMAT_SPEC = "F"  # a sequence when not None; no callbacks at all when None
IMPORT_NAMES = "I"  # ``ImportStar``: required; otherwise a sequence

_HELPERS = {
    "required": REQUIRED,
    "optional": OPTIONAL,
    "sentinel": SENTINEL,
    "sequence": SEQUENCE,
    "body_sequence": BODY,
}
_VISIT = re.compile(
    r"(?:(\w+)\s*=\s*\(?\s*)?visit_(required|optional|sentinel|sequence|body_sequence)"
    r"\(\s*self,\s*\"(\w+)\",\s*(?:self\.)?(\w+),\s*visitor,?\s*\)"
)
_SPECIAL = {
    "format_spec": FORMAT_SPEC,  # `visit_sequence(...) if format_spec is not None`
    "names": IMPORT_NAMES,  # `visit_required(...) if isinstance(names, ImportStar)`
}

Spec = tuple[tuple[str, str], ...]
#: Per node class: its visited fields in libcst's order, with how each is visited
#: (None: the class is not understood, and takes libcst's own path).
_SPECS: dict[type, Spec | None] = {}


def spec_of(kind: type) -> Spec | None:
    try:
        return _SPECS[kind]
    except KeyError:
        found = _SPECS[kind] = _read_spec(kind)
        return found


def _read_spec(kind: type) -> Spec | None:
    """The fields ``kind._visit_and_replace_children`` visits, from its source;
    None where the source says more than "build a ``kind`` from the visited
    fields and copies of the others"."""
    try:
        # inspect.getsource, without its search of sys.modules for the file.
        code = kind._visit_and_replace_children.__code__
        lines = linecache.getlines(code.co_filename)
        first = lines[code.co_firstlineno - 1]
    except (AttributeError, IndexError):
        return None
    # The method: its signature (to the first line ending in ':'), then up to
    # the next line indented no deeper than its `def`.
    indent = len(first) - len(first.lstrip())
    block: list[str] = []
    rest = iter(lines[code.co_firstlineno - 1 :])
    for line in rest:
        block.append(line)
        if line.split("#")[0].rstrip().endswith(":"):
            break
    for line in rest:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        block.append(line)
    source = textwrap.dedent("".join(block))
    if not source.lstrip().startswith("def "):
        return None
    body = re.sub(r"#[^\n]*", "", source.split(":\n", 1)[1])
    fields: list[tuple[str, str]] = []
    seen: set[str] = set()
    for keyword, helper, label, value in _VISIT.findall(body):
        if label != value or keyword not in (label, ""):
            return None
        how = _SPECIAL.get(label, _HELPERS[helper])
        if label in seen or not keyword:
            if label in seen and how is IMPORT_NAMES and not keyword:
                continue  # the other branch of the conditional
            return None
        seen.add(label)
        fields.append((label, how))
    # What is left must be the constructor call and copies of unvisited fields.
    rest = _VISIT.sub("", body)
    rest = re.sub(r"\w+\s*=\s*self\.\w+", "", rest)
    rest = re.sub(
        r"if\s+isinstance\(names,\s*ImportStar\)\s*else|if\s+format_spec\s+is\s+not\s+None\s+else\s+None",
        "",
        rest,
    )
    rest = re.sub(r"[\s,()]", "", rest)
    expected = {
        f"return{kind.__name__}",
        "returnself.__class__",
        "returnself",  # a leaf: libcst hands the node itself back too
        f"ret={kind.__name__}returnret",
    }
    if rest not in expected:
        return None
    declared = {f.name for f in getattr(kind, "__dataclass_fields__", {}).values()}
    if not seen <= declared:
        return None
    return tuple(fields)


Hook = Callable[..., Any] | None
#: A dispatch entry's hook that says "call the transformer's own on_visit/on_leave".
_OWN = object()


def _no_op(name: str, hook: Any) -> bool:
    """Is ``hook`` one of libcst's do-nothing typed hooks (every transformer has them)?"""
    for base in _Transformer.__mro__[1:]:
        if name in base.__dict__:
            return base.__dict__[name] is hook
    return False


class Dispatch:
    """How ``transform`` calls one transformer class's hooks.

    A class that keeps libcst's ``on_visit`` / ``on_leave`` gets its ``visit_<Node>``
    / ``leave_<Node>`` looked up once per node class (None: not defined); one that
    overrides them gets them called. Attribute callbacks are made only where the
    class may have a hook for them."""

    def __init__(
        self,
        visitor_class: type,
        visit_hook: Callable[[type], Hook] | None = None,
        leave_hook: Callable[[type], Hook] | None = None,
        attribute_calls: bool | None = None,
    ) -> None:
        self.visitor_class = visitor_class
        self.default_visit = (
            visit_hook is not None or visitor_class.on_visit is _Transformer.on_visit
        )
        self.default_leave = (
            leave_hook is not None or visitor_class.on_leave is _Transformer.on_leave
        )
        self._visit_hook = visit_hook or (lambda kind: self._lookup("visit_", kind))
        self._leave_hook = leave_hook or (lambda kind: self._lookup("leave_", kind))
        if attribute_calls is None:
            attribute_calls = (
                visitor_class.on_visit_attribute is not _Transformer.on_visit_attribute
                or visitor_class.on_leave_attribute
                is not _Transformer.on_leave_attribute
                or any(
                    name.startswith(("visit_", "leave_"))
                    and name.count("_") >= 2
                    and not _no_op(name, getattr(visitor_class, name))
                    for name in dir(visitor_class)
                )
            )
        self.attribute_calls = attribute_calls
        self.visit_hooks: dict[type, Hook] = {}
        self.leave_hooks: dict[type, Hook] = {}
        self.entries: dict[type, tuple[Any, Any, Spec | None]] = {}
        self._hooked: int | bool | None = False  # False: not yet computed

    @property
    def hooked(self) -> int | None:
        """The node classes with a hook (``node_kinds`` bits); a subtree with
        none of them makes no callback and is not entered. None: every node
        may make one (``on_visit``/``on_leave`` or attribute callbacks)."""
        if self._hooked is False:
            if self.default_visit and self.default_leave and not self.attribute_calls:
                self._hooked = node_kinds.hooked_mask(
                    lambda kind: self.visit_hook(kind) is not None
                    or self.leave_hook(kind) is not None
                )
            else:
                self._hooked = None
        return self._hooked  # type: ignore[return-value]

    def _lookup(self, prefix: str, kind: type) -> Hook:
        name = prefix + kind.__name__
        hook = getattr(self.visitor_class, name, None)
        if hook is None or _no_op(name, hook):
            return None
        if isinstance(hook, FunctionType):
            return hook
        return lambda visitor, *nodes: getattr(visitor, name)(*nodes)

    def visit_hook(self, kind: type) -> Hook:
        try:
            return self.visit_hooks[kind]
        except KeyError:
            hook = self.visit_hooks[kind] = self._visit_hook(kind)
            return hook

    def leave_hook(self, kind: type) -> Hook:
        try:
            return self.leave_hooks[kind]
        except KeyError:
            hook = self.leave_hooks[kind] = self._leave_hook(kind)
            return hook

    def entry(self, kind: type) -> tuple[Any, Any, Spec | None]:
        """What ``_Walk.node`` needs for ``kind``: the visit hook (None: none;
        ``_OWN``: the transformer's ``on_visit``), the leave hook (likewise) and
        the fields."""
        found = self.entries[kind] = (
            self.visit_hook(kind) if self.default_visit else _OWN,
            self.leave_hook(kind) if self.default_leave else _OWN,
            spec_of(kind),
        )
        return found


class _Walk:
    """One ``transform``: the transformer, its dispatch, and whether a leave
    callback returned something else than the node it was given."""

    __slots__ = ("changed", "dispatch", "hooked", "visitor")

    def __init__(self, visitor: Any, dispatch: Dispatch) -> None:
        self.visitor = visitor
        self.dispatch = dispatch
        self.changed = False
        self.hooked = dispatch.hooked

    def node(self, node: cst.CSTNode) -> Any:
        hooked = self.hooked
        if hooked is not None:
            # mask_of's own cache lookup, inlined: this runs for every node.
            table = node_kinds._MASKS
            found = table.get(id(node)) if table is not None else None
            mask = (
                found[0]
                if found is not None
                else node_kinds.mask_of(node, _node_fields)
            )
            if not mask & hooked:
                return node  # no callback anywhere below: nothing can change
        visitor = self.visitor
        kind = type(node)
        entry = self.dispatch.entries.get(kind)
        if entry is None:
            entry = self.dispatch.entry(kind)
        visit, leave, spec = entry
        if visit is None:
            go = True
        elif visit is _OWN:
            go = visitor.on_visit(node)
        else:
            go = visit(visitor, node) is not False
        updated = node
        if go:
            if spec is None:
                updated = node._visit_and_replace_children(visitor)
            elif spec:
                updated = self.children(node, spec)
        if leave is None:
            return updated
        if leave is _OWN:
            result = visitor.on_leave(node, updated)
        else:
            result = leave(visitor, node, updated)
        if result is not updated:
            self.changed = True
            if not isinstance(result, (_CSTNode, _Removal, _Flatten)):
                raise cst.CSTValidationError(
                    "Expected a node of type CSTNode or a RemovalSentinel, "
                    + f"but got a return value of {type(result).__name__}"
                )
        return result

    def children(self, node: cst.CSTNode, spec: Spec) -> cst.CSTNode:
        visitor = self.visitor
        attributes = self.dispatch.attribute_calls
        changes: dict[str, Any] | None = None
        for name, how in spec:
            value = getattr(node, name)
            if how is FORMAT_SPEC:
                if value is None:
                    continue  # libcst makes no callbacks for an absent format spec
                how = SEQUENCE
            elif how is IMPORT_NAMES:
                how = REQUIRED if isinstance(value, cst.ImportStar) else SEQUENCE
            if attributes:
                visitor.on_visit_attribute(node, name)
            if how is SEQUENCE or how is BODY:
                new = self.sequence(value, how is BODY)
            elif value is None or value is _MAYBE:
                new = value  # optional or sentinel, absent: nothing to visit
            else:
                new = self.node(value)
                if new is value:
                    pass  # unchanged: no sentinel to handle
                elif how is REQUIRED:
                    if isinstance(new, (_Removal, _Flatten)):
                        raise TypeError(
                            f"We got a {type(new).__name__} while visiting a "
                            f"{type(value).__name__}. This node's parent does not "
                            "allow it."
                        )
                elif isinstance(new, _Flatten):
                    raise TypeError(
                        f"We got a FlattenSentinel while visiting a "
                        f"{type(value).__name__}. This node's parent does not allow "
                        "for it to be replaced with a sequence."
                    )
                elif isinstance(new, _Removal):
                    new = None if how is OPTIONAL else _Maybe.DEFAULT
            if attributes:
                visitor.on_leave_attribute(node, name)
            if new is not value:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is None:
            return node
        return node.with_changes(**changes)

    def sequence(self, children: Any, body: bool) -> Any:
        """The visited children; ``children`` itself where none changed (and it
        is a tuple, as libcst's result always is)."""
        out: list[Any] = []
        same = type(children) is tuple
        for child in children:
            new = self.node(child)
            if new is child:
                out.append(new)
                continue
            same = False
            if isinstance(new, _Removal):
                continue
            if isinstance(new, _Flatten):
                for item in new:
                    if body and not child._is_removable() and item._is_removable():
                        continue
                    out.append(item)
            elif not (body and not child._is_removable() and new._is_removable()):
                out.append(new)
        return children if same else tuple(out)


def dispatch_of(visitor: Any) -> Dispatch:
    # Kept on the class itself: a class defined inside a function goes away with it.
    kind = type(visitor)
    found = kind.__dict__.get("_fasttransform_dispatch")
    if found is None:
        found = Dispatch(kind)
        kind._fasttransform_dispatch = found  # type: ignore[attr-defined]
    return found


def transform(
    node: cst.CSTNode, visitor: cst.CSTTransformer, dispatch: Dispatch | None = None
) -> tuple[Any, bool]:
    """``node.visit(visitor)`` for a transformer, rebuilding only changed paths;
    and whether any leave callback returned something else than its
    ``updated_node``. The caller runs ``unique_nodes`` on a changed result that
    later passes read metadata of."""
    walk = _Walk(visitor, dispatch or dispatch_of(visitor))
    with node_kinds.keep():
        return walk.node(node), walk.changed


#: Per node class: the fields that hold its children (None: libcst's ``children``).
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def fields_of(kind: type) -> tuple[str, ...] | None:
    try:
        return _FIELDS[kind]
    except KeyError:
        spec = spec_of(kind)
        found = _FIELDS[kind] = None if spec is None else tuple(n for n, _ in spec)
        return found


def _node_fields(node: cst.CSTNode) -> tuple[str, ...] | None:
    return fields_of(type(node))


def unique_nodes(node: cst.CSTNode) -> cst.CSTNode:
    """``node`` with every node object that occurs a second time in it replaced
    by a deep copy (and the path to it rebuilt); ``node`` itself where none does.
    Leaves that libcst itself never copies (``spec_of`` is empty) are left shared."""
    seen: dict[int, cst.CSTNode] = {}  # keeps every node alive: ids stay unique
    return _unique(node, seen)


def _unique(node: cst.CSTNode, seen: dict[int, cst.CSTNode]) -> cst.CSTNode:
    spec = spec_of(type(node))
    if spec == ():
        # A leaf libcst hands back itself (whitespace, a newline, `*`): libcst's
        # own trees share these, and no rule asks for their metadata.
        return node
    if id(node) in seen:
        return node.deep_clone()
    seen[id(node)] = node
    if spec is None:  # not read from libcst's source: every field that holds nodes
        names = [
            name
            for name in getattr(node, "__dataclass_fields__", ())
            if isinstance(getattr(node, name), (_CSTNode, tuple, list))
        ]
    else:
        names = [name for name, _ in spec]
    changes: dict[str, Any] | None = None
    for name in names:
        value = getattr(node, name)
        if value is None or value is _MAYBE:
            continue
        if type(value) is tuple or type(value) is list:
            items = [_unique(item, seen) for item in value]
            new: Any = (
                value
                if all(a is b for a, b in zip(items, value, strict=True))
                else tuple(items)
            )
        else:
            new = _unique(value, seen)
        if new is not value:
            if changes is None:
                changes = {}
            changes[name] = new
    return node if changes is None else node.with_changes(**changes)
