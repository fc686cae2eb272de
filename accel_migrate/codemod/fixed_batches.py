"""Batches taken once out of a sharded loader, one fact a module (asked by AM006
and AM041): ``fixed_images, _ = next(iter(test_loader))`` before training, to
reconstruct or sample from the same images every epoch (VQ-VAE, GAN and
segmentation repos), ``x_fixed, c_org = next(data_iter)`` after ``data_iter =
iter(data_loader)`` (StarGAN's fixed translation batch), ``self.x_fixed, c_org =
next(iter(self.loader))`` kept on a solver class and sampled from in another
method, a probe batch for a monitoring loss.

Once ``accel.prepare_dataloader`` wraps the loader, such a batch is this
process's share of the loader's first batch: what is computed from it (sampled
or reconstructed images, a probe loss, a data-dependent initialisation) is the
main process's share's where the original used the whole batch. A batch taken in
a loop that runs a backward (``next(it)`` in the step, also through a function
the step calls), or in a loop that reads a loader, is training (or evaluation)
data, rightly a share, and is not one of these; nor is one trained on by the
statements right after it.

The fact (``fixed_batches(index)``) holds each such ``next(...)`` call, the
variables (names and ``self.`` attributes of a class) that hold it or a value
made from it (through assignments, unpacking, attributes and the parameters of
the file's functions), and the calls that write a file from one of them
(``save_image``, ``torch.save``, a TensorBoard writer's ``add_images``, a local
module's helper that writes...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .file_changes import PATH_WRITERS
from .names import SAVES
from .reduction.placement import code
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

#: Methods of a TensorBoard writer that write an image, a video, a figure or an
#: embedding of tensors.
WRITER_METHODS = frozenset(
    {"add_image", "add_images", "add_video", "add_figure", "add_embedding"}
)
_NEXT = m.Call(func=m.Name("next"))
#: Rounds of following the batch through assignments and parameters.
_ROUNDS = 6


@dataclass(frozen=True, eq=False)
class FixedBatch:
    """One ``next(...)`` that takes a batch once off a sharded loader."""

    taken: cst.Call
    #: The loader it iterates (``test_loader``, ``self.loader``).
    loader: cst.BaseExpression
    #: What it is taken into: "`fixed_x, _`", or "a batch".
    into: str
    #: A variable it is taken into is set again from ``accel.gather(...)``.
    gathered: bool


@dataclass(frozen=True, eq=False)
class FixedWrite:
    """A call that writes a file from a value made from a fixed batch."""

    call: cst.Call
    #: The variable of the batch its arguments read (``fixed_x``, ``grid``).
    leaf: cst.Name | cst.Attribute


@dataclass
class FixedBatches:
    #: Each fixed batch, by its ``next(...)`` call, in the file's order.
    batches: dict[cst.Call, FixedBatch] = field(default_factory=dict)
    #: The variables holding one (or a value made from one), and which.
    holders: dict[Key, FixedBatch] = field(default_factory=dict)
    #: The writes of each batch, in the file's order.
    writes: dict[FixedBatch, list[FixedWrite]] = field(default_factory=dict)

    def at(self, call: cst.Call) -> FixedBatch | None:
        return self.batches.get(call)

    def written(self, batch: FixedBatch) -> list[FixedWrite]:
        return self.writes.get(batch, [])


@lru_cache(maxsize=8)
def fixed_batches(index: ModuleIndex) -> FixedBatches:
    """The batches taken once off this file's sharded loaders (see the module)."""
    fact = FixedBatches()
    if not index.loaders:
        return fact
    for call in index.calls:
        batch = _taken_once(index, call)
        if batch is not None:
            fact.batches[call] = batch
    if not fact.batches:
        return fact
    fact.holders = _holders(index, fact.batches)
    if not fact.holders:
        return fact
    for call in index.calls:
        if not writes(index, call):
            continue
        for arg in call.args:
            for leaf in _leaves(index, arg.value, fact.holders):
                batch = fact.holders[index.key(leaf)]  # type: ignore[index]
                found = fact.writes.setdefault(batch, [])
                if not any(w.call is call for w in found):
                    found.append(FixedWrite(call, leaf))
    return fact


# -- which next(...) takes a fixed batch ------------------------------------------------
def _taken_once(index: ModuleIndex, call: cst.Call) -> FixedBatch | None:
    if not m.matches(call, _NEXT) or len(call.args) != 1 or call.args[0].keyword:
        return None
    if "builtins.next" not in index.qualnames(call.func):
        return None
    loader = _iterated_loader(index, call.args[0].value) or _held_loader(
        index, call.args[0].value
    )
    if (
        loader is None
        or _in_training_step(index, call, set())
        or _in_loader_loop(index, call)
        or _trained_after(index, call)
    ):
        return None
    statement = index.parent(call)
    into = "a batch"
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        into = f"`{code(statement.targets[0].target)}`"
    return FixedBatch(call, loader, into, _gathered(index, statement))


def _iterated_loader(
    index: ModuleIndex, arg: cst.BaseExpression
) -> cst.BaseExpression | None:
    """The loader ``arg`` iterates: ``iter(loader)``, or a name every value of
    which is one (``data_iter = iter(data_loader)``)."""
    if isinstance(arg, cst.Call):
        if (
            "builtins.iter" in index.qualnames(arg.func)
            and len(arg.args) == 1
            and index.holds_tagged(arg.args[0].value, index.loaders)
        ):
            return arg.args[0].value
        return None
    key = index.key(arg)
    values = index.values.get(key, []) if key is not None else []
    loaders = [
        _iterated_loader(index, value) if isinstance(value, cst.Call) else None
        for value in values
    ]
    if not loaders or any(loader is None for loader in loaders):
        return None
    return loaders[0]


def _held_loader(
    index: ModuleIndex, arg: cst.BaseExpression
) -> cst.BaseExpression | None:
    """A loader, or an iterator the index tags as one, under the loop wrappers
    ``arg`` is made of (``iter(enumerate(loader))``, ``self.data_iter``)."""
    value: cst.BaseExpression | None = arg
    while value is not None:
        if index.holds_tagged(value, index.loaders):
            return value
        value = index._loop_wrapped(value)
    return None


def _gathered(index: ModuleIndex, statement: cst.CSTNode | None) -> bool:
    """Is a variable the batch is taken into set again from the runtime's
    gather (``fixed_x = accel.gather(fixed_x)``): the whole batch again?"""
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1):
        return False
    target = statement.targets[0].target
    names = (
        [e.value for e in target.elements]
        if isinstance(target, (cst.Tuple, cst.List))
        else [target]
    )
    for name in names:
        key = index.key(name)
        if key is not None and _gathers(index, index.values.get(key, [])):
            return True
    return False


def _gathers(index: ModuleIndex, values: list[cst.BaseExpression | None]) -> bool:
    return any(
        isinstance(v, cst.Call) and index.is_runtime_call(v, "gather") for v in values
    )


def _trained_after(index: ModuleIndex, call: cst.Call) -> bool:
    """Is a backward run by a statement after the one of ``call`` in its block,
    outside a loop (``x, y = next(iter(loader))``; ``model(x).sum().backward()``):
    a step on that one batch, which is training data, rightly a share."""
    statement: cst.CSTNode | None = call
    while statement is not None and not isinstance(
        statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
    ):
        statement = index.parent(statement)
    block = index.parent(statement) if statement is not None else None
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)) or statement not in body:
        return False
    after = list(body)[list(body).index(statement) + 1 :]
    return any(
        not isinstance(s, (cst.For, cst.While)) and index.runs_backward(s)
        for s in after
    )


def _in_training_step(
    index: ModuleIndex, node: cst.CSTNode, seen: set[cst.FunctionDef]
) -> bool:
    """Is ``node`` run by a loop that runs a backward: in its body, or in a
    function of the file that such a loop calls (or that is called from one)?"""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While)) and index.runs_backward(
            ancestor.body
        ):
            return True
        if isinstance(ancestor, cst.Lambda):
            return True  # called from where the analysis does not follow
        if isinstance(ancestor, cst.FunctionDef):
            if ancestor in seen:
                return False
            seen.add(ancestor)
            sites = index.call_sites(ancestor)
            return any(_in_training_step(index, site, seen) for site in sites)
    return False


def _in_loader_loop(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Is ``node`` in a loop of its function that reads a loader (an
    evaluation loop's ``next(it)``: a batch of a sequence, not a kept one)?"""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return False
        if isinstance(ancestor, (cst.For, cst.While)) and index.reads_loader(ancestor):
            return True
    return False


# -- what holds one ------------------------------------------------------------------------
def _holders(
    index: ModuleIndex, batches: dict[cst.Call, FixedBatch]
) -> dict[Key, FixedBatch]:
    """Each variable that holds (something made from) a fixed batch: a name or a
    ``self.`` attribute it is assigned or unpacked into, and on through
    assignments and the parameters of the file's functions, until it settles. A
    variable set again from ``accel.gather(...)`` holds the whole batch: none."""
    holders: dict[Key, FixedBatch] = {}
    bindings = _bindings(index)
    gathered = {key for key, values in bindings if _gathers(index, values)}
    #: Functions of the file that return one (``def fixed_batch(self): return
    #: next(iter(self.loader))``): what a call of one is assigned to holds it.
    returning: dict[cst.FunctionDef, FixedBatch] = {}
    for _ in range(_ROUNDS):
        before = len(holders) + len(returning)
        for function in index.functions:
            if function not in returning:
                found = _returned(index, function, batches, holders)
                if found is not None:
                    returning[function] = found
        for key, values in bindings:
            if key in holders or key in gathered:
                continue
            for value in values:
                found = _held(index, value, batches, holders, returning)
                if found is not None:
                    holders[key] = found
                    break
        for call in index.calls:
            for parameter, passed in index.arguments(call):
                if parameter in holders:
                    continue
                leaves = _leaves(index, passed, holders)
                if leaves:
                    holders[parameter] = holders[index.key(leaves[0])]  # type: ignore[index]
        if len(holders) + len(returning) == before:
            break
    return holders


def _held(
    index: ModuleIndex,
    value: cst.BaseExpression,
    batches: dict[cst.Call, FixedBatch],
    holders: dict[Key, FixedBatch],
    returning: dict[cst.FunctionDef, FixedBatch],
) -> FixedBatch | None:
    """The fixed batch ``value`` is made from: one it takes itself, one a
    variable it reads holds, or one a function it calls returns."""
    found = _taken_in(value, batches)
    if found is not None:
        return found
    leaves = _leaves(index, value, holders)
    if leaves:
        return holders[index.key(leaves[0])]  # type: ignore[index]
    calls = findall(value, m.Call()) + ([value] if isinstance(value, cst.Call) else [])
    for call in calls:
        if _inside_gather(index, call, value):
            continue
        callee = index.callee(call)  # type: ignore[arg-type]
        if callee is not None and callee[0] in returning:
            return returning[callee[0]]
    return None


def _returned(
    index: ModuleIndex,
    function: cst.FunctionDef,
    batches: dict[cst.Call, FixedBatch],
    holders: dict[Key, FixedBatch],
) -> FixedBatch | None:
    """The fixed batch a ``return`` of ``function`` gives back whatever it is
    passed: one it takes (``return next(it)``, ``batch = next(it); return
    batch``) or one a ``self.`` attribute or a variable of an outer scope holds
    (``return self.x_fixed``). A value made from a parameter is the caller's
    (``def denorm(x): return (x + 1) / 2`` is called with other batches too)."""
    for statement in findall(function, m.Return()):
        value = statement.value  # type: ignore[attr-defined]
        if value is None or index.enclosing_function(statement) is not function:
            continue
        found = _taken_in(value, batches)
        if found is not None:
            return found
        for leaf in _leaves(index, value, holders):
            key = index.key(leaf)
            assert key is not None
            if getattr(key[0], "node", None) is not function or _takes(
                index, key, batches
            ):
                return holders[key]
    return None


def _takes(index: ModuleIndex, key: Key, batches: dict[cst.Call, FixedBatch]) -> bool:
    """Is every value of the variable ``key`` a fixed batch it takes itself
    (``batch = next(it)``)?"""
    values = [v for v in index.values.get(key, []) if v is not None]
    values += [value for value, _, _ in index.unpacked.get(key, [])]
    return bool(values) and all(_taken_in(v, batches) is not None for v in values)


def _taken_in(
    value: cst.BaseExpression, batches: dict[cst.Call, FixedBatch]
) -> FixedBatch | None:
    """The fixed batch a ``next(...)`` in ``value`` takes, if any."""
    for call in _next_calls(value):
        if call in batches:
            return batches[call]  # type: ignore[index]
    return None


def _bindings(index: ModuleIndex) -> list[tuple[Key, list[cst.BaseExpression]]]:
    """Every variable's assigned values, unpacked ones included (``fixed_x, _ =
    next(...)`` binds ``fixed_x`` to the call)."""
    found: dict[Key, list[cst.BaseExpression]] = {}
    for key, values in index.values.items():
        found.setdefault(key, []).extend(v for v in values if v is not None)
    for key, unpacked in index.unpacked.items():
        found.setdefault(key, []).extend(value for value, _, _ in unpacked)
    return list(found.items())


def _next_calls(value: cst.BaseExpression) -> list[cst.CSTNode]:
    return findall(value, _NEXT) + ([value] if m.matches(value, _NEXT) else [])


def _leaves(
    index: ModuleIndex, expr: cst.CSTNode, holders: dict[Key, FixedBatch]
) -> list[cst.Name | cst.Attribute]:
    """The variables holding a fixed batch that ``expr`` reads (names and
    ``self.`` attributes), outside ``accel.gather(...)``, in its order."""
    candidates: list[cst.CSTNode] = [expr] if isinstance(expr, cst.Name) else []
    candidates += findall(expr, m.Name() | m.Attribute(value=m.Name("self")))
    found: list[cst.Name | cst.Attribute] = []
    for node in candidates:
        parent = index.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            continue  # `x.size`: an attribute's name, not a variable
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            continue
        if _inside_gather(index, node, expr):
            continue  # `accel.gather(fixed_x)`: the whole batch again
        key = index.key(node)
        if key is not None and key in holders:
            assert isinstance(node, (cst.Name, cst.Attribute))
            found.append(node)
    return found


def _inside_gather(index: ModuleIndex, node: cst.CSTNode, within: cst.CSTNode) -> bool:
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.Call) and index.is_runtime_call(ancestor, "gather"):
            return True
        if ancestor is within:
            return False
    return False


# -- what writes a file ------------------------------------------------------------------
def writes(index: ModuleIndex, call: cst.Call) -> bool:
    """Does ``call`` write a file (or a run's log) from its arguments?"""
    from .rules.main_process_writes import RUN_FUNCTIONS

    if index.qualnames(call.func) & (frozenset(PATH_WRITERS) | SAVES | RUN_FUNCTIONS):
        return True
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in WRITER_METHODS:
        return True
    helper = index.helper(call.func)
    return helper is not None and bool(helper.writes)
