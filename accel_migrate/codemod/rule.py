"""The rule base class, the registry and what a rule may ask of the engine.

A rule is a libcst transformer in its own module under ``rules/``. Defining a
subclass with a ``code`` registers it; the module docstring is its documentation.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import libcst as cst
from libcst.metadata import (
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    QualifiedNameProvider,
    ScopeProvider,
)

from .analysis import ModuleIndex
from .findings import Finding, Status
from .linemap import LineMap

RUNTIME_MODULE = "accel_migrate.runtime"

_REGISTRY: dict[str, type[Rule]] = {}


@dataclass
class RuleContext:
    """State shared by the rules that run over one file."""

    alias: str
    original_code: str
    findings: list[Finding] = field(default_factory=list)
    #: Set by a rule that changed the tree (not only the runtime import).
    changed: bool = False
    _linemap: tuple[str, LineMap] | None = None

    def original_line(self, current_code: str, line: int) -> int:
        if current_code == self.original_code:
            return line
        if self._linemap is None or self._linemap[0] != current_code:
            self._linemap = (current_code, LineMap(self.original_code, current_code))
        return self._linemap[1].original(line)


class Rule(cst.CSTTransformer):
    """Base class. Subclasses set ``code``, ``name`` and ``summary`` and register."""

    METADATA_DEPENDENCIES = (
        QualifiedNameProvider,
        ScopeProvider,
        PositionProvider,
        ParentNodeProvider,
    )

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    #: Rules run by (phase, code). A rule that must see the code before another
    #: rule rewrites it (AMP calls before AM007 turns `.backward()` into a call)
    #: takes a lower phase.
    phase: ClassVar[int] = 50

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return
        if cls.code in _REGISTRY and _REGISTRY[cls.code] is not cls:
            raise RuntimeError(f"rule code {cls.code} is used twice")
        _REGISTRY[cls.code] = cls

    def __init__(self, context: RuleContext, wrapper: MetadataWrapper) -> None:
        super().__init__()
        self.context = context
        self.wrapper = wrapper
        self._current_code = wrapper.module.code

    @classmethod
    def doc(cls) -> str:
        return sys.modules[cls.__module__].__doc__ or ""

    @classmethod
    def apply(cls, module: cst.Module, context: RuleContext) -> cst.Module:
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        return wrapper.visit(cls(context, wrapper))

    # -- what the rule can ask ---------------------------------------------------------
    @cached_property
    def index(self) -> ModuleIndex:
        return ModuleIndex(self.wrapper, self.context.alias)

    def qualnames(self, node: cst.CSTNode) -> set[str]:
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    def is_call_to(self, node: cst.CSTNode, names: Iterable[str]) -> bool:
        return isinstance(node, cst.Call) and not self.qualnames(node.func).isdisjoint(
            names
        )

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.get_metadata(ParentNodeProvider, node, None)

    def runtime_attr(self, name: str) -> cst.Attribute:
        return cst.Attribute(value=cst.Name(self.context.alias), attr=cst.Name(name))

    def runtime_call(self, name: str, args: Iterable[cst.Arg]) -> cst.Call:
        return cst.Call(func=self.runtime_attr(name), args=tidy_args(list(args)))

    def report(self, node: cst.CSTNode, status: Status, message: str) -> None:
        """Record a finding at ``node`` (a node of the tree being visited)."""
        position = self.get_metadata(PositionProvider, node).start
        line = self.context.original_line(self._current_code, position.line)
        self.context.findings.append(
            Finding(line, position.column + 1, self.code, status, message)
        )
        if status == "fixed":
            self.context.changed = True


def tidy_args(args: list[cst.Arg]) -> list[cst.Arg]:
    """A comma after every argument but the last (the last keeps the user's style)."""
    tidy = []
    for i, arg in enumerate(args):
        if i < len(args) - 1 and arg.comma is cst.MaybeSentinel.DEFAULT:
            arg = arg.with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
        tidy.append(arg)
    return tidy


def registered_rules() -> list[type[Rule]]:
    from . import rules  # noqa: F401  (importing the package registers every rule)

    return sorted(_REGISTRY.values(), key=lambda rule: (rule.phase, rule.code))
