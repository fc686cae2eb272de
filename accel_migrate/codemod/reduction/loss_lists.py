"""The terms of a Python list of losses that ``sum(losses)`` adds.

What: ``losses = []``, then ``losses.append(F.mse_loss(out, y))`` (also
``losses += [...]``, ``losses.extend([...])``, ``losses.insert(0, ...)``,
``losses[i] = ...``, a list display or comprehension bound to the name), then
``sum(losses)`` or ``torch.stack(losses).sum()``: the terms a list of losses
holds, read where the list is proven one (every binding of the name is a list
display, a tuple display or a comprehension).

Why: the builtin ``sum`` of a list of losses adds its terms; it is not a sum
over the batch's samples. A sum of two means is a mean (the processes' shares
average); reading it as a sum over the batch (``reduction="sum"``) weighs the
gradients by the world size. A term appended in a loop counts once per
iteration: a loop over the batch's samples (``for o, t in zip(out, targets)``,
``for i in range(out.size(0))``) gives a sample's term, and their sum is one
over the batch; a loop over a fixed number of items (``range(3)``, a display,
a model's ``nn.ModuleList``) keeps a mean of means; any other loop leaves the
terms unknown (``loop_walks``). A term added under an ``if`` that reads the
batch counts on some processes' shares and not others': unknown. A dict
grown by stores (``losses["mse"] = ...``) and ``losses = losses + [term]``
are read the same way (``dict_terms``).

Example: ``losses.append(F.mse_loss(out, y)); losses.append(F.l1_loss(out,
y)); loss = sum(losses)`` is a mean (``accel.backward(loss)``); a list also
handed to a function, or extended with a value whose terms cannot be read,
has no known reduction (AM007, needs-review).

Fix-safety: every way the file grows the list must be read; a name bound to
anything else is not proven a list, and a use that may grow it elsewhere
(handed to a call other than ``sum``/``torch.stack``/``len``) leaves the
terms unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .facts import Fact, _added
from .loop_walks import batch_value, loop_walk
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex
    from .loss_dicts import FactOf

#: Calls a list of losses may be handed without being grown.
_READERS = frozenset({"sum", "len", "stack", "cat", "print", "mean", "tuple"})
_DISPLAYS = (cst.List, cst.Tuple)
_COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp)


@dataclass
class ListTerms:
    """The terms of a list of losses: (expression, whether a sample's)."""

    terms: list[tuple[cst.BaseExpression, bool]] = field(default_factory=list)
    #: Why the terms cannot all be read ("" where they can).
    reason: str = ""


def list_terms(
    index: ModuleIndex, iterable: cst.BaseExpression, depth: int = 0
) -> ListTerms | None:
    """The terms of ``iterable``, a list display, a comprehension or a name
    every binding of which is one (with what the file appends); None where
    it is not proven a list."""
    found = ListTerms()
    if isinstance(iterable, _DISPLAYS):
        _display(index, iterable, found, depth)
        return found
    if isinstance(iterable, _COMPREHENSIONS):
        _comprehension(index, iterable, found, depth)
        return found
    if not isinstance(iterable, cst.Name) or depth > 4:
        return None
    key = index.key(iterable)
    values = index.values.get(key, []) if key is not None else []
    concatenated = [v for v in values if _self_added(index, v, key) is not None]
    values = [v for v in values if not any(v is c for c in concatenated)]
    if not values or not all(isinstance(v, (*_DISPLAYS, cst.ListComp)) for v in values):
        return None
    for value in values:
        if isinstance(value, _DISPLAYS):
            _display(index, value, found, depth)
        else:
            _comprehension(index, value, found, depth)  # type: ignore[arg-type]
    name = iterable.value
    bindings = [s for v in values if (s := _statement(index, v)) is not None]
    for value in concatenated:
        # `losses = losses + [term]`: as `losses += [term]`
        use = _self_added(index, value, key)
        assert use is not None
        rows = _appended_per_row(index, use, bindings, found)
        _extended(index, _other_operand(value, use), found, depth, rows)  # type: ignore[arg-type]
    for node in _uses(index, name, key):
        if not any(node is _self_added(index, c, key) for c in concatenated):
            _grown(index, node, name, bindings, found, depth)
    return found


def dict_terms(index: ModuleIndex, base: cst.BaseExpression) -> ListTerms | None:
    """The terms of a dict of losses that the file grows by storing
    (``losses = {}``, then ``losses["mse"] = F.mse_loss(out, y)``): its
    displays' values and every stored value, each counted once per iteration
    of a fixed loop around the store. None where ``base`` is not a name every
    binding of which is a dict display, or nothing is stored into it."""
    if not isinstance(base, cst.Name):
        return None
    key = index.key(base)
    values = index.values.get(key, []) if key is not None else []
    if not values or not all(isinstance(v, cst.Dict) for v in values):
        return None
    found = ListTerms()
    for value in values:
        for element in value.elements:  # type: ignore[union-attr]
            if not isinstance(element, cst.DictElement):
                return None  # `{**other}`
            found.terms.append((element.value, False))
    bindings = [s for v in values if (s := _statement(index, v)) is not None]
    stored = False
    for use in _uses(index, base.value, key):
        stored = _stored(index, use, base.value, bindings, found) or stored
    return found if stored else None


def _stored(
    index: ModuleIndex,
    use: cst.Name,
    name: str,
    bindings: list[cst.CSTNode],
    found: ListTerms,
) -> bool:
    """Read what ``use`` (one reading of a dict's name) stores into it; True
    for a store (``d[k] = value``)."""
    parent = index.parent(use)
    if isinstance(parent, cst.Subscript) and parent.value is use:
        target = index.parent(parent)
        if isinstance(target, cst.AssignTarget):
            assign = index.parent(target)
            rows = _appended_per_row(index, use, bindings, found)
            if rows:
                found.reason = found.reason or (
                    f"a loss is stored into the dict `{name}` in a loop over the "
                    "batch's samples: whether each sample's loss gets its own key "
                    "(a sum over them) or overwrites the last one, the analysis "
                    "cannot read"
                )
            elif isinstance(assign, cst.Assign):
                found.terms.append((assign.value, False))
            return True
        if isinstance(target, cst.AugAssign) and target.target is parent:
            found.reason = found.reason or (
                f"a term of the dict of losses `{name}` is changed by `{code(target)}`"
            )
        return False
    if isinstance(parent, cst.Attribute) and parent.value is use:
        if parent.attr.value not in ("values", "keys", "items", "get"):
            found.reason = found.reason or (
                f"the dict of losses `{name}` is changed by `.{parent.attr.value}"
                "(...)`, which the analysis does not read"
            )
        return False
    if isinstance(parent, cst.Arg):
        _, called = _handed_to(index, parent)
        if called not in _READERS:
            found.reason = found.reason or (
                f"the dict of losses `{name}` is handed on, where terms the "
                "analysis does not see may be stored into it"
            )
    return False


def _self_added(
    index: ModuleIndex, value: cst.BaseExpression | None, key: object
) -> cst.Name | None:
    """The name's reading in ``value`` where ``value`` is ``name + other`` or
    ``other + name`` (``losses = losses + [term]``)."""
    if not (
        isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add)
    ):
        return None
    for side in (value.left, value.right):
        if isinstance(side, cst.Name) and index.key(side) == key:
            return side
    return None


def _other_operand(value: cst.BinaryOperation, use: cst.Name) -> cst.BaseExpression:
    return value.right if value.left is use else value.left


def terms_fact(found: ListTerms, fact_of: FactOf, depth: int, how: str) -> Fact:
    """The sum (``how`` "sum") or mean of a list's terms: a mean where every
    term is a mean (a mean of means for "mean"), a sum where every term is
    a sum or a sample's; unknown otherwise, never a sum over the batch."""
    if found.reason:
        return Fact("unknown", found.reason)
    if not found.terms:
        return Fact(
            "unknown", "the list of losses has no term that the analysis can read"
        )
    result: Fact | None = None
    for term, row in found.terms:
        fact = fact_of(term, term, depth + 1)
        if fact.kind == "unknown":
            return fact
        if row:
            if fact.kind != "mean":
                return Fact(
                    "unknown",
                    f"the list of losses holds `{code(term)}`, one per sample, "
                    "whose reduction the analysis cannot read",
                )
            fact = Fact(how)  # type: ignore[arg-type]
        elif fact.kind not in ("mean", "sum", "token-mean", "constant"):
            return Fact(
                "unknown",
                f"the list of losses holds `{code(term)}`, whose reduction over "
                "the batch (a mean or a sum over its samples) the analysis "
                "cannot read",
            )
        result = fact if result is None else _added(result, fact)
    assert result is not None
    if result.kind == "constant":
        return Fact("unknown", "the list of losses holds no loss of the batch")
    return result


def _display(
    index: ModuleIndex, display: cst.List | cst.Tuple, found: ListTerms, depth: int
) -> None:
    for element in display.elements:
        if isinstance(element, cst.StarredElement):
            _extended(index, element.value, found, depth, False)
        else:
            found.terms.append((element.value, False))


def _comprehension(
    index: ModuleIndex,
    comprehension: cst.ListComp | cst.GeneratorExp,
    found: ListTerms,
    depth: int,
) -> None:
    loop = comprehension.for_in
    if (
        loop.inner_for_in is None
        and isinstance(loop.target, cst.Name)
        and m.matches(comprehension.elt, m.Name(loop.target.value))
    ):
        # `[l for l in losses]`: the terms of `losses`
        _extended(index, loop.iter, found, depth, False)
        return
    iterables = []
    while loop is not None:
        iterables.append(loop.iter)
        loop = loop.inner_for_in
    found.terms.append((comprehension.elt, _rows(index, iterables, found)))


def _extended(
    index: ModuleIndex,
    value: cst.BaseExpression,
    found: ListTerms,
    depth: int,
    rows: bool,
) -> None:
    inner = list_terms(index, value, depth + 1)
    if inner is None:
        found.reason = found.reason or (
            f"the list of losses is extended with `{code(value)}`, whose terms "
            "the analysis cannot read"
        )
        return
    found.terms += [(t, r or rows) for t, r in inner.terms]
    found.reason = found.reason or inner.reason


def _uses(index: ModuleIndex, name: str, key: object) -> list[cst.Name]:
    from ..subtrees import findall

    return [
        n  # type: ignore[misc]
        for n in findall(index.module, m.Name(name))
        if index.key(n) == key
    ]


def _statement(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.SimpleStatementLine):
            return ancestor
    return None


def _grown(
    index: ModuleIndex,
    use: cst.Name,
    name: str,
    bindings: list[cst.CSTNode],
    found: ListTerms,
    depth: int,
) -> None:
    """Read what ``use`` (one reading of the list's name) adds to it."""
    parent = index.parent(use)
    rows = _appended_per_row(index, use, bindings, found)
    if isinstance(parent, cst.Attribute) and parent.value is use:
        call = index.parent(parent)
        method = parent.attr.value
        if not (isinstance(call, cst.Call) and call.func is parent):
            return
        args = [a.value for a in call.args]
        if method == "append" and len(args) == 1:
            found.terms.append((args[0], rows))
        elif method == "insert" and len(args) == 2:
            found.terms.append((args[1], rows))
        elif method == "extend" and len(args) == 1:
            _extended(index, args[0], found, depth, rows)
        elif method not in ("pop", "clear", "copy", "index", "count"):
            found.reason = found.reason or (
                f"the list of losses `{name}` is changed by `.{method}(...)`, which "
                "the analysis does not read"
            )
        return
    if isinstance(parent, cst.AugAssign) and parent.target is use:
        if isinstance(parent.operator, cst.AddAssign):
            _extended(index, parent.value, found, depth, rows)
        else:
            found.reason = found.reason or (
                f"the list of losses `{name}` is changed by `{code(parent)}`"
            )
        return
    if isinstance(parent, cst.Subscript) and parent.value is use:
        target = index.parent(parent)
        if isinstance(target, cst.AssignTarget):
            assign = index.parent(target)
            if isinstance(assign, cst.Assign):
                found.terms.append((assign.value, rows))
        elif isinstance(target, cst.AugAssign) and target.target is parent:
            found.reason = found.reason or (
                f"a term of the list of losses `{name}` is changed by "
                f"`{code(target)}`"
            )
        return
    if isinstance(parent, cst.Arg):
        func, called = _handed_to(index, parent)
        if called not in _READERS:
            found.reason = found.reason or (
                f"the list of losses `{name}` is handed to `{code(func)}(...)`, "
                "which may add terms the analysis does not see"
                if func is not None
                else f"the list of losses `{name}` is handed on"
            )


def _appended_per_row(
    index: ModuleIndex, use: cst.Name, bindings: list[cst.CSTNode], found: ListTerms
) -> bool:
    """Is ``use`` in a loop (not around the list's binding) over the batch's
    samples? Every other loop around it must walk a fixed number of terms;
    where one is not proven to, the reason is left on ``found``."""
    loops: list[cst.BaseExpression] = []
    for ancestor in index.ancestors(use):
        if any(a is ancestor for b in bindings for a in index.ancestors(b)):
            break
        if (
            isinstance(ancestor, cst.If)
            and not _presence_test(ancestor.test)
            and batch_value(index, ancestor.test)
        ):
            found.reason = found.reason or (
                f"a term is added to the losses under `if {code(ancestor.test)}`, "
                "which reads the batch: each process's share may add a different "
                "count of terms than the whole batch does, so neither a mean of "
                "means nor a sum over the samples is proven"
            )
        if isinstance(ancestor, cst.For):
            loops.append(ancestor.iter)
        elif isinstance(ancestor, cst.While):
            found.reason = found.reason or (
                "the losses are collected in a `while` loop, whose count of terms "
                "the analysis cannot read"
            )
            return False
    return _rows(index, loops, found)


def _presence_test(test: cst.BaseExpression) -> bool:
    """``aux is not None``, ``x is None``, ``isinstance(out, tuple)``, and those
    joined by ``and``/``or``/``not``: a test of what an output is, the same on
    every process's share (an auxiliary head's output present or not), not of
    the batch's values."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _presence_test(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _presence_test(test.left) and _presence_test(test.right)
    if isinstance(test, cst.Comparison):
        return all(
            isinstance(c.operator, (cst.Is, cst.IsNot))
            and m.matches(c.comparator, m.Name("None"))
            for c in test.comparisons
        )
    return m.matches(test, m.Call(func=m.Name("isinstance")))


def _rows(
    index: ModuleIndex, iterables: list[cst.BaseExpression], found: ListTerms
) -> bool:
    """Do the loops over ``iterables`` walk the batch's samples (each term one
    sample's), with any other loop walking a fixed number of terms? A loop
    proven neither leaves its reason on ``found``."""
    rows = False
    for iterable in iterables:
        walk = loop_walk(index, iterable)
        if walk.kind == "unknown":
            found.reason = found.reason or walk.reason
            return False
        rows = rows or walk.kind == "rows"
    return rows


def _handed_to(
    index: ModuleIndex, arg: cst.Arg
) -> tuple[cst.BaseExpression | None, str]:
    """The function a collection is handed to as ``arg`` and its last name
    (``sum`` of ``sum(xs)``, ``extend`` of ``ys.extend(xs)``; "" where unnamed)."""
    call = index.parent(arg)
    func = call.func if isinstance(call, cst.Call) else None
    if isinstance(func, cst.Name):
        return func, func.value
    if isinstance(func, cst.Attribute):
        return func, func.attr.value
    return func, ""
