"""libcst matchers read once into plain predicates, for ``subtrees.findall``.

``subtrees.findall`` takes a matcher's candidates from a preorder's per-class
lists; a matcher that asks more than its class (``m.Name("model")``,
``m.Call(func=m.Attribute(attr=m.Name("backward")))``) was then checked on each
candidate by libcst's ``_matches``, which reads the matcher's dataclass fields
anew (``dataclasses.fields``) and walks its isinstance ladder for every node and
every field (about 173,000 checks over the benchmark's 30 scripts; round 27 of
issue 14 in docs/performance.md).

``predicate(matcher)`` reads the matcher once into a closure that makes the same
comparisons in the same order, stopping where libcst stops, for the forms whose
meaning in libcst's ``_matches`` / ``_node_matches`` / ``_attribute_matches``
(libcst 1.x, without metadata) is short:

- a node matcher (``m.Name``, ``m.Call``, ... : a class of ``libcst.matchers``
  named as a ``CSTNode`` class): the node's class name is the matcher's, then
  each field but ``_metadata`` in the dataclass's order; the ``metadata`` field
  must be ``DoNotCare`` (a metadata matcher needs a fetcher: not read);
- ``OneOf`` of node matchers: any option, in order;
- a field's value: ``DoNotCare`` (anything), ``MatchIfTrue`` (the function's
  result is true), ``None`` (``is None``), a string (``==``), a bool (``is``),
  a list or tuple of node matchers (item by item, the same length), a node
  matcher or ``OneOf`` of node matchers (as above; a sequence,
  ``MaybeSentinel`` or ``None`` has no matcher's class name, as libcst's
  ``_attribute_matches`` answers no for them).

Anything else (a sequence with a wildcard or ``DoNotCare``, ``AllOf``, ``TypeOf``, ``MatchRegex``,
``SaveMatchedNode``, ``~`` inversions, metadata, a wildcard) gives None: the
caller keeps libcst's ``_matches``. The matchers are frozen dataclasses; a
predicate is kept per matcher object (the object held, so its id is not reused).
``COMPILED = False`` checks every candidate with libcst's ``_matches``, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.matchers._matcher_base import (
    BaseMatcherNode,
    DoNotCareSentinel,
    MatchIfTrue,
    OneOf,
)

#: Check candidates with the predicates (False: libcst's ``_matches`` for
#: every candidate, as before round 27; for comparisons).
COMPILED = True

Predicate = Callable[[Any], bool]

#: Per matcher object: (the matcher, its predicate or None: not read).
_PREDICATES: dict[int, tuple[Any, Predicate | None]] = {}
#: Per node matcher class: its fields but ``_metadata``, in the dataclass's order.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def predicate(matcher: Any) -> Predicate | None:
    """A function that answers ``_matches(node, matcher, null fetcher) is not
    None`` for any ``CSTNode``; None where this module does not read
    ``matcher``."""
    cached = _PREDICATES.get(id(matcher))
    if cached is not None and cached[0] is matcher:
        return cached[1]
    found = _node_or_one_of(matcher)
    if len(_PREDICATES) > 512:
        _PREDICATES.clear()
    _PREDICATES[id(matcher)] = (matcher, found)
    return found


def _node_or_one_of(matcher: Any) -> Predicate | None:
    if type(matcher) is OneOf:
        options = [_node(option) for option in matcher.options]
        if not options or any(p is None for p in options):
            return None
        checks: tuple[Predicate, ...] = tuple(options)  # type: ignore[arg-type]
        return lambda node: any(check(node) for check in checks)
    return _node(matcher)


def _is_node_matcher(kind: type) -> bool:
    """A generated matcher class of ``libcst.matchers`` for a ``CSTNode`` class of
    the same name (not ``OneOf``/``AllOf``/``TypeOf``, which are
    ``BaseMatcherNode`` too)."""
    name = kind.__name__
    node_class = getattr(cst, name, None)
    return (
        issubclass(kind, BaseMatcherNode)
        and getattr(m, name, None) is kind
        and isinstance(node_class, type)
        and issubclass(node_class, cst.CSTNode)
    )


def _node(matcher: Any) -> Predicate | None:
    kind = type(matcher)
    if not _is_node_matcher(kind):
        return None
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(
            f.name for f in fields(kind) if f.name != "_metadata"
        )
    checks: list[tuple[str, Predicate]] = []
    for name in names:
        desired = getattr(matcher, name)
        if name == "metadata":
            if isinstance(desired, DoNotCareSentinel):
                continue
            return None  # a metadata matcher: libcst's, with its fetcher
        check = _attribute(desired)
        if check is None:
            return None
        if check is not _ANYTHING:
            checks.append((name, check))
    class_name = kind.__name__
    if not checks:
        return lambda node: type(node).__name__ == class_name
    if len(checks) == 1:
        ((field, only),) = checks
        return lambda node: (
            type(node).__name__ == class_name and only(getattr(node, field))
        )
    ordered = tuple(checks)

    def check_all(node: Any) -> bool:
        if type(node).__name__ != class_name:
            return False
        for field, check in ordered:
            if not check(getattr(node, field)):
                return False
        return True

    return check_all


def _anything(value: Any) -> bool:
    return True


_ANYTHING: Predicate = _anything


def _empty(value: Any) -> bool:
    return isinstance(value, Sequence) and not value


def _sequence(desired: list[Any] | tuple[Any, ...]) -> Predicate | None:
    """A list or tuple of node matchers (or ``OneOf`` of them), no wildcard, no
    ``DoNotCare``: libcst's ``_sequence_matches`` then checks item against
    matcher in order, stopping at the first that fails, and matches where both
    run out together (a node matcher left over matches no zero nodes). A value
    that is no sequence has no class name "list"/"tuple" for ``_node_matches``:
    no match."""
    elements = [_node_or_one_of(element) for element in desired]
    if any(check is None for check in elements):
        return None
    if not elements:
        return _empty  # `args=[]`: an empty sequence only
    checks: tuple[Predicate, ...] = tuple(elements)  # type: ignore[arg-type]
    count = len(checks)

    def matches(value: Any) -> bool:
        if not isinstance(value, Sequence):
            return False
        for item, check in zip(value, checks, strict=False):  # the shorter
            if not check(item):
                return False
        return len(value) == count

    return matches


def _attribute(desired: Any) -> Predicate | None:
    """``_attribute_matches(value, desired) is not None`` as a predicate of the
    value, in libcst's order of cases; None: not read."""
    if isinstance(desired, DoNotCareSentinel):
        return _ANYTHING
    if isinstance(desired, MatchIfTrue):
        function = desired.func
        return lambda value: bool(function(value))
    if desired is None:
        return lambda value: value is None
    if isinstance(desired, str):
        return lambda value: value == desired
    if isinstance(desired, bool):
        return lambda value: value is desired
    if type(desired) in (list, tuple):
        return _sequence(desired)
    if isinstance(desired, BaseMatcherNode):
        # A sequence value never matches a node matcher or a OneOf of them
        # (libcst: no sequence option), nor does MaybeSentinel or None (no
        # matcher's class name): the class-name check answers no for each.
        return _node_or_one_of(desired)
    return None
