"""The rule base class, the registry and what a rule may ask of the engine.

A rule is a libcst transformer in its own module under ``rules/``. Defining a
subclass with a ``code`` registers it; the module docstring is its documentation.

A statement with ``# accel-migrate: skip`` on one of its lines (for a compound
statement: on its header) is left alone by every rule (with ``skip[AM010]``: by
that rule): the base class neither visits it nor lets the rule replace it. The
comments are parsed in suppression.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any, ClassVar

import libcst as cst
from libcst._metadata_dependent import _UNDEFINED_DEFAULT
from libcst.metadata import (
    MetadataWrapper,
    PositionProvider,
    QualifiedNameProvider,
)

from . import fasttransform
from .analysis import ModuleIndex
from .findings import Finding, Status
from .parents import ParentProvider
from .rule_context import RuleContext
from .scopes import Assignment, ClassScope, ScopeProvider
from .suppression import applies

_REGISTRY: dict[str, type[Rule]] = {}
#: Rules whose ``applies`` says no skip their pass (False: every rule runs its
#: pass; the equivalence tests compare the two).
GATES = True
_LAZY_METADATA = frozenset({PositionProvider, ParentProvider})

__all__ = [
    "Rule",
    "RuleContext",
    "keyword_arg",
    "registered_rules",
    "rules_by_code",
    "tidy_args",
]


class Rule(cst.CSTTransformer):
    """Base class. Subclasses set ``code``, ``name`` and ``summary`` and register."""

    # Qualified names are answered by the ModuleIndex's LazyQualifiedNames (see
    # get_metadata): only the scopes are computed for the whole tree.
    METADATA_DEPENDENCIES = (
        ScopeProvider,
        PositionProvider,
        ParentProvider,
    )

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    #: Rules run by (phase, code). A rule that must see the code before another
    #: rule rewrites it (AMP calls before AM007 turns `.backward()` into a call)
    #: takes a lower phase.
    phase: ClassVar[int] = 50
    #: The rule prepares models, optimizers or loaders where they are built. It
    #: does not run on a helper module of a batch migrated for its callers
    #: (``ProjectFacts.library_for``): they prepare what its helpers build,
    #: where they call them (AM102).
    prepares: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._hooks = {}
        cls._attribute_hooks = any(
            name.startswith(("visit_", "leave_"))
            and name.count("_") >= 2
            and getattr(cls, name) is not getattr(cst.CSTTransformer, name, None)
            for name in dir(cls)
        )
        if "code" not in cls.__dict__:
            return
        if cls.code in _REGISTRY and _REGISTRY[cls.code] is not cls:
            raise RuntimeError(f"rule code {cls.code} is used twice")
        _REGISTRY[cls.code] = cls

    def __init__(self, context: RuleContext, wrapper: MetadataWrapper) -> None:
        super().__init__()
        self.context = context
        self.wrapper = wrapper
        self._suppressed = context.suppressed_of(wrapper)
        #: Set when a ``leave_`` returned something else than the node it was given.
        self.modified = False

    @property
    def _current_code(self) -> str:
        """The code of the tree this pass visits (generated with its positions)."""
        return self.context.code_of(self.wrapper)

    @classmethod
    def doc(cls) -> str:
        return sys.modules[cls.__module__].__doc__ or ""

    @classmethod
    def apply(cls, module: cst.Module, context: RuleContext) -> cst.Module:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        return cls.run(wrapper, context)[0]

    @classmethod
    def run(
        cls, wrapper: MetadataWrapper, context: RuleContext
    ) -> tuple[cst.Module, bool]:
        """Visit ``wrapper``'s module; the new module and whether the rule changed
        anything. When it did not, the new module equals the old one, and the
        caller may keep the old one with its computed metadata."""
        rule = cls(context, wrapper)
        if (
            GATES
            and context.original_wrapper is not None
            # a pass records the `# accel-migrate: skip` statements it meets
            and not rule._suppressed
            and not rule.applies()
        ):
            return wrapper.module, False
        if not fasttransform.ENABLED:
            module = wrapper.visit(rule)
            return module, rule.modified
        # Only the changed paths are rebuilt (fasttransform): the new module
        # shares the unchanged subtrees with the old one.
        with rule.resolve(wrapper):
            module, changed = fasttransform.transform(
                wrapper.module, rule, cls._dispatch(bool(rule._suppressed))
            )
        if not (rule.modified or changed):
            return module, False
        # A rule that put one node in two places (an original node kept where it
        # was and copied elsewhere): each place gets its own node, as libcst's
        # full rebuild gave it, since the next rule's metadata is keyed by node.
        # Found, with the new tree's parents, from its new nodes (tree_parents).
        computed = wrapper._metadata.get(ParentProvider)  # type: ignore[attr-defined]
        return context.tree_parents.advance(wrapper.module, module, computed), True

    def applies(self) -> bool:
        """Can this rule's pass change or report anything on this file? A rule
        that cannot skips its pass (``run``). Decided from shared facts of the
        parsed tree (``self.context.original_index``, the project facts), never
        from a walk of the rule's own: a rule that overrides it must show that
        on a file where it says no, its pass changes nothing and reports
        nothing, whatever the rules before it changed (none of them writes the
        calls the gates look for). ``tests/codemod/test_rule_gates.py``
        migrates the fixtures with and without the gates."""
        return True

    def originally_calls(self, names: Iterable[str]) -> bool:
        """Does the parsed tree call one of ``names`` (qualified names, as
        ``is_call_to`` compares them)? For ``applies``: no rule writes a call
        of torch's or the user's, only the runtime's (``accel.*``) and
        ``torch.no_grad()`` (AM021), so a call that is not in the parsed tree
        is in no later tree."""
        return not self.context.original_index.called_names.isdisjoint(names)

    @classmethod
    def _dispatch(cls, suppressing: bool) -> fasttransform.Dispatch:
        """How fasttransform calls this rule: its ``visit_``/``leave_`` hooks
        directly (looked up once, as ``_hook``), or, where statements are
        suppressed, through ``on_visit``/``on_leave``, which skip them."""
        key = "_fast_suppressing" if suppressing else "_fast_direct"
        found = cls.__dict__.get(key)
        if found is None:
            if suppressing:
                found = fasttransform.Dispatch(
                    cls, attribute_calls=cls._attribute_hooks
                )
            else:
                found = fasttransform.Dispatch(
                    cls,
                    visit_hook=lambda kind: cls._hook("visit_", kind),
                    leave_hook=lambda kind: cls._hook("leave_", kind),
                    attribute_calls=cls._attribute_hooks,
                )
            setattr(cls, key, found)
        return found

    # -- metadata: positions and parents are computed when a rule first asks -----------
    # (a rule that finds nothing in a file never does, and each costs a pass over
    # the whole tree; the wrapper keeps what was computed for the next rule).
    @contextmanager
    def resolve(self, wrapper: MetadataWrapper) -> Iterator[None]:
        eager = self.get_inherited_dependencies() - _LAZY_METADATA
        self.metadata = dict(wrapper.resolve_many(eager))
        try:
            yield
        finally:
            self.metadata = {}

    def get_metadata(
        self, key: Any, node: cst.CSTNode, default: Any = _UNDEFINED_DEFAULT
    ) -> Any:
        if key is QualifiedNameProvider:
            found = self.context.qualified_names_of(self.wrapper).get(node)
            if found is None:
                if default is _UNDEFINED_DEFAULT:
                    raise KeyError(f"no qualified names for {type(node).__name__}")
                return default
            return found
        if key in _LAZY_METADATA and key not in self.metadata:
            self.metadata[key] = (  # type: ignore[index]
                self.context.positions_of(self.wrapper)
                if key is PositionProvider
                else self.wrapper.resolve(key)
            )
        return super().get_metadata(key, node, default)

    # -- dispatch -------------------------------------------------------------------------
    # libcst looks up ``visit_<Node>`` / ``leave_<Node>`` / ``visit_<Node>_<field>`` by
    # name for every node and field, and finds do-nothing defaults for most: a rule
    # only overrides a few. Looking each name up once per class makes a pass over a
    # large file several times faster.
    _hooks: ClassVar[dict[tuple[str, type], Any]] = {}
    _attribute_hooks: ClassVar[bool] = True

    @classmethod
    def _hook(cls, prefix: str, kind: type) -> Any:
        key = (prefix, kind)
        try:
            return cls._hooks[key]
        except KeyError:
            name = prefix + kind.__name__
            hook = getattr(cls, name, None)
            if hook is getattr(cst.CSTTransformer, name, None):
                hook = None
            cls._hooks[key] = hook
            return hook

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        if self._attribute_hooks:
            super().on_visit_attribute(node, attribute)

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        if self._attribute_hooks:
            super().on_leave_attribute(original_node, attribute)

    # -- suppression: a statement marked ``# accel-migrate: skip`` is not visited -------
    def _skips(self, node: cst.CSTNode) -> bool:
        return bool(self._suppressed) and (
            id(node) in self._suppressed
            and applies(self._suppressed[id(node)], self.code)
        )

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self._skips(node):
            position = self.get_metadata(PositionProvider, node, None)
            if position is not None:
                original = self.context.original_line
                lines = (
                    original(self._current_code, position.start.line),
                    original(self._current_code, position.end.line),
                )
                self.context.suppressed.add(lines)
                self.context.suppressed_codes[lines] = self._suppressed[id(node)]
            return False
        hook = self._hook("visit_", type(node))
        return hook is None or hook(self, node) is not False

    def on_leave(  # type: ignore[override]
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> Any:
        if self._skips(original_node):
            return updated_node  # its children were not visited: unchanged
        hook = self._hook("leave_", type(original_node))
        if hook is None:
            return updated_node
        result = hook(self, original_node, updated_node)
        if result is not updated_node:
            self.modified = True
        return result

    # -- what the rule can ask ---------------------------------------------------------
    @cached_property
    def index(self) -> ModuleIndex:
        return self.context.index_of(self.wrapper)

    def qualnames(self, node: cst.CSTNode) -> set[str]:
        # ``get_metadata(QualifiedNameProvider, node, set())``'s names, made
        # once per node (a copy: callers may change the set they are given)
        return set(self.context.qualified_names_of(self.wrapper).names(node))

    def is_call_to(self, node: cst.CSTNode, names: Iterable[str]) -> bool:
        return isinstance(node, cst.Call) and not self.qualnames(node.func).isdisjoint(
            names
        )

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.get_metadata(ParentProvider, node, None)

    def plain_assignments(
        self, name: cst.Name
    ) -> list[tuple[Assignment, cst.BaseExpression]] | None:
        """Every binding of ``name`` in its scope with its value, when each one is a
        plain ``name = value`` (also ``a = name = value``); None when any other
        binding exists (a parameter, loop target, import, ``+=``, walrus, a
        ``match`` capture...), in a class body (which reads a global of the same
        name until its own assignment runs), or after ``from m import *``."""
        scope = self.get_metadata(ScopeProvider, name, None)
        if (
            scope is None
            or isinstance(scope, ClassScope)
            or self.index.star_import
            or name.value in self.index.match_captures
        ):
            return None
        found = []
        for binding in scope[name.value]:
            # A builtin's binding has no node at all.
            if not isinstance(binding, Assignment) or not isinstance(
                binding.node, cst.Name
            ):
                return None
            holder = self.parent(binding.node)
            assign = (
                self.parent(holder) if isinstance(holder, cst.AssignTarget) else None
            )
            if not isinstance(assign, cst.Assign):
                return None
            found.append((binding, assign.value))
        return found or None

    def runtime_attr(self, name: str) -> cst.Attribute:
        return cst.Attribute(value=cst.Name(self.context.alias), attr=cst.Name(name))

    def runtime_call(self, name: str, args: Iterable[cst.Arg]) -> cst.Call:
        return cst.Call(func=self.runtime_attr(name), args=tidy_args(list(args)))

    def on_main_process(self, call: cst.Call) -> cst.Call:
        """``f(a, b)`` -> ``accel.on_main_process(f, a, b)``, in the call's own layout."""
        func = call.func
        if func.lpar:
            func = func.with_changes(lpar=(), rpar=())
        first = cst.Arg(value=func)
        if isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
            # One argument a line: `f` gets a line of its own, as the others have.
            first = first.with_changes(
                comma=cst.Comma(whitespace_after=call.whitespace_before_args)
            )
        return call.with_changes(
            func=self.runtime_attr("on_main_process"),
            args=tidy_args([first, *call.args]),
        )

    def original_start(self, node: cst.CSTNode) -> tuple[int, int]:
        """The user's (line, 0-based column) where ``node`` of this pass's tree
        starts (``RuleContext.original_start``)."""
        return self.context.original_start(self.wrapper, node)

    def original_line(self, node: cst.CSTNode) -> int:
        return self.context.original_start(self.wrapper, node)[0]

    def report(
        self,
        node: cst.CSTNode,
        status: Status,
        message: str,
        *,
        if_migrated: bool = False,
    ) -> None:
        """Record a finding at ``node`` (a node of the tree being visited).

        ``if_migrated``: the finding says what the *migrated* file would do (each
        process sees its share of the batch, a write runs on every rank...). When
        another rule leaves the file whole (``block``), nothing of it is split, the
        claim is false of what the user gets, and the engine drops the finding.
        Whether a file is blocked is known only once every rule has run, so the
        finding is recorded and the engine decides (rules run in any order).
        """
        line, column = self.context.original_start(self.wrapper, node)
        finding = Finding(
            line, column + 1, self.code, status, self.context.aliased(message)
        )
        self.context.findings.append(finding)
        if if_migrated:
            self.context.if_migrated.append(finding)
        if status == "fixed":
            self.context.changed = True

    def block(self, node: cst.CSTNode, message: str) -> None:
        """A needs-review finding at ``node`` that leaves the whole file unchanged
        (see ``RuleContext.block``)."""
        line, column = self.context.original_start(self.wrapper, node)
        self.context.block(
            Finding(
                line,
                column + 1,
                self.code,
                "needs-review",
                self.context.aliased(message),
            )
        )


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value``, spelled as PEP 8 spells a keyword argument."""
    return cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""),
            whitespace_after=cst.SimpleWhitespace(""),
        ),
    )


def tidy_args(args: list[cst.Arg]) -> list[cst.Arg]:
    """A comma after every argument but the last (the last keeps the user's style),
    and parentheses around a generator that is no longer the only argument
    (``tqdm(b for b in loader)`` with ``disable=`` added would not parse)."""
    tidy = []
    for i, arg in enumerate(args):
        if (
            len(args) > 1
            and isinstance(arg.value, cst.GeneratorExp)
            and not arg.value.lpar
        ):
            arg = arg.with_changes(
                value=arg.value.with_changes(
                    lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
                )
            )
        if i < len(args) - 1 and arg.comma is cst.MaybeSentinel.DEFAULT:
            arg = arg.with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
        tidy.append(arg)
    return tidy


def registered_rules() -> list[type[Rule]]:
    from . import rules  # noqa: F401  (importing the package registers every rule)

    return sorted(_REGISTRY.values(), key=lambda rule: (rule.phase, rule.code))


def rules_by_code() -> list[type[Rule]]:
    """The rules in the order of their codes (for listings; they run by phase)."""
    return sorted(registered_rules(), key=lambda rule: rule.code)
