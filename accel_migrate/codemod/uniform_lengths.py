"""Lists whose length is the same on every process, though their items differ.

NCSN's ``test`` loops ``for i, sample in enumerate(all_samples)`` to save each
annealed Langevin sample with ``torch.save``, where ``all_samples`` is the list
``anneal_Langevin_dynamics`` returns: ``images = []``, one ``images.append(...)``
per step of loops over ``enumerate(sigmas)`` and ``range(n_steps_each)``. The
samples are drawn at random, so the divergence analysis marks the list (and the
loop's body) as rank-dependent; but how many turns the loop makes, which is
what a ``for`` decides, is the list's length, and that is fixed by loops every
process runs alike. AM028 asks ``uniform_length`` before it calls such a loop a
decision.

The same holds of jcwleo's ICM ``for work, action in zip(works, actions):
work.step(action)``, where ``actions = np.random.randint(0, n,
size=(num_worker,))`` is drawn by each process and ``works`` is a list built
over ``range(num_worker)``: a draw whose ``size=`` (or torch shape) is the same
on every process has as many items everywhere, and so has a ``zip`` whose every
argument does (a data loader among them: it gives as many batches on every
process, sharded or not), a ``range`` of values every process shares, a list or
tuple display, and a comprehension over such an iterable with no ``if``. A
value no rank-local source reaches (``rank_local_sources``, a complete walk) is
the same, so of the same length, everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .index_syntax import _LOOP_QUALNAMES, _LOOP_WRAPPERS, parameter_names
from .subtrees import findall

if TYPE_CHECKING:
    from .index_syntax import parameter_names
from .analysis import ModuleIndex

#: How far a name is followed back through variables and returns.
_DEPTH = 3
_WRAPPERS = frozenset({"builtins.enumerate", "builtins.reversed"})
_ZIPS = frozenset({"builtins.zip"})
_RANGES = frozenset({"builtins.range"})
#: what a loader loop steps through around a zip: ``index_syntax``'s wrappers
_THROUGH = frozenset(_LOOP_QUALNAMES) - _ZIPS
#: numpy draws whose positional arguments are the dimensions of the result
_NUMPY_DIMENSIONS = frozenset({"rand", "randn"})
#: torch draws given the result's shape (``randint`` after its bounds)
_TORCH_SHAPED = frozenset({"rand", "randn", "randint"})


def uniform_length(
    index: ModuleIndex, iterable: cst.BaseExpression, depth: int = 0
) -> bool:
    """Does ``iterable`` have as many items on every process: ``enumerate(x)``
    of such an ``x``, a name only ever bound to one, or the result of a local
    function that returns a list it fills with ``append`` in loops that run
    alike on every process (not under a condition)?"""
    if depth > _DEPTH:
        return False
    if isinstance(iterable, cst.Call):
        qualnames = index.qualnames(iterable.func)
        if qualnames & _WRAPPERS:
            args = [a for a in iterable.args if a.keyword is None and not a.star]
            return bool(args) and uniform_length(index, args[0].value, depth + 1)
        if qualnames & _ZIPS:
            if any(a.star or a.keyword is not None for a in iterable.args):
                return False
            return bool(iterable.args) and all(
                _uniform_part(index, a.value, depth + 1) for a in iterable.args
            )
        if qualnames & _RANGES:
            return _shared(index, iterable)
        sizes = drawn_sizes(qualnames, iterable)
        if sizes is not None:
            return all(_shared(index, size) for size in sizes)
        target = index.callee(iterable)
        return target is not None and _returns_uniform_list(index, target[0])
    if isinstance(iterable, (cst.List, cst.Tuple)):
        return not any(isinstance(e, cst.StarredElement) for e in iterable.elements)
    if isinstance(iterable, (cst.ListComp, cst.GeneratorExp)):
        loop = iterable.for_in
        return (
            loop.inner_for_in is None
            and not loop.ifs
            and loop.asynchronous is None
            and _uniform_part(index, loop.iter, depth + 1)
        )
    if not isinstance(iterable, cst.Name):
        return False
    key = index.key(iterable)
    values = index.values.get(key, []) if key is not None else []
    # a list bound to the name may be grown after (`outliers = []`, then
    # `outliers.append(x)` under a test of the data): only what builds it says
    return bool(values) and all(
        v is not None
        and not isinstance(v, (cst.List, cst.ListComp))
        and uniform_length(index, v, depth + 1)
        for v in values
    )


def zipped_parts(
    index: ModuleIndex,
    iterable: cst.BaseExpression,
    is_loader: Callable[[cst.BaseExpression], bool],
) -> list[cst.BaseExpression]:
    """The arguments of the ``zip`` a loop over a data loader steps through
    (``zip(loader, weights)``, also inside ``enumerate``/``tqdm``) that are no
    loader themselves (``is_loader``); [] where it zips nothing else. The loop
    makes as many turns as the shortest of them: a loader gives as many
    batches on every process, the others may not."""
    while isinstance(iterable, cst.Call):
        qualnames = index.qualnames(iterable.func)
        positional = [a for a in iterable.args if a.keyword is None]
        name = iterable.func.value if isinstance(iterable.func, cst.Name) else ""
        if qualnames & _ZIPS or name == "zip":
            return [a.value for a in positional if a.star or not is_loader(a.value)]
        if not positional or not (
            qualnames & _THROUGH or name in _LOOP_WRAPPERS - {"zip"}
        ):
            return []
        iterable = positional[0].value
    return []


def _uniform_part(index: ModuleIndex, value: cst.BaseExpression, depth: int) -> bool:
    """An iterable with as many items on every process: a data loader (as many
    batches on each, sharded or not), one ``uniform_length`` reads, or a value
    the same everywhere."""
    return (
        index.loader_loop(value)[0]
        or uniform_length(index, value, depth)
        or _shared(index, value)
    )


def _shared(index: ModuleIndex, value: cst.BaseExpression) -> bool:
    """Does no rank-local source reach ``value`` (a complete walk)?"""
    provenance = index.rank_local_sources.of(value)
    return provenance.complete and not provenance.sources


def drawn_sizes(
    qualnames: set[str] | frozenset[str], call: cst.Call
) -> list[cst.BaseExpression] | None:
    """The expressions that fix how many items a random draw has:
    ``np.random.randint(0, n, size=(k,))``'s ``size``, ``np.random.rand(k, d)``'s
    dimensions, ``torch.randint(0, n, (k,))``'s shape, ``torch.randn(k, d)``'s,
    ``torch.randperm(n)``'s ``n``, ``random.sample(xs, k)``'s ``k``; None where
    the call is no draw of a fixed size read here."""
    args = [a for a in call.args if not a.star]
    if len(args) != len(call.args):
        return None
    keywords = {a.keyword.value: a.value for a in args if a.keyword is not None}
    positional = [a.value for a in args if a.keyword is None]
    for name in qualnames:
        module, _, function = name.rpartition(".")
        if module == "numpy.random":
            if "size" in keywords:
                return [keywords["size"]]
            if function in _NUMPY_DIMENSIONS and positional and not keywords:
                return positional
            if function == "permutation" and len(positional) == 1:
                return positional
        elif module == "torch" and function in _TORCH_SHAPED:
            if "size" in keywords:
                return [keywords["size"]]
            shapes = [v for v in positional if isinstance(v, (cst.Tuple, cst.List))]
            if function == "randint":
                return shapes[-1:] or None
            return positional or None
        elif module == "torch" and function == "randperm" and len(positional) == 1:
            return positional
        elif name == "random.sample" and len(positional) == 2:
            return positional[1:]
    return None


def _returns_uniform_list(index: ModuleIndex, function: cst.FunctionDef) -> bool:
    returns = findall(function.body, m.Return())
    if not returns:
        return False
    for ret in returns:
        value = ret.value  # type: ignore[attr-defined]
        if not isinstance(value, cst.Name) or not _filled_alike(index, function, value):
            return False
    return True


def _filled_alike(
    index: ModuleIndex, function: cst.FunctionDef, name: cst.Name
) -> bool:
    """``name`` is bound only to ``[]`` and grows only by ``name.append(...)``
    in loops whose bodies are the same on every process, under no ``if``."""
    key = index.key(name)
    values = index.values.get(key, []) if key is not None else []
    if not values or not all(
        isinstance(v, cst.List) and not v.elements for v in values
    ):
        return False
    divergent = index.divergence.divergent
    for reference in findall(function.body, m.Name(value=name.value)):
        if index.key(reference) != key:
            continue
        parent = index.parent(reference)
        if isinstance(parent, cst.Return):
            continue
        if isinstance(parent, cst.AssignTarget):
            continue  # `images = []`, checked above
        if not (
            isinstance(parent, cst.Attribute)
            and parent.value is reference
            and parent.attr.value == "append"
        ):
            return False  # handed on, extended, or popped: not followed
        for ancestor in index.ancestors(reference):
            if ancestor is function:
                break
            if isinstance(ancestor, (cst.If, cst.While, cst.Try)):
                return False
            if isinstance(ancestor, cst.For) and ancestor.body in divergent:
                return False
    return True


#: Calls with as many items as their one argument.
_SAME_COUNT = frozenset(
    {
        "builtins.enumerate",
        "builtins.reversed",
        "builtins.list",
        "builtins.tuple",
        "builtins.sorted",
    }
)


def drawn_count(
    index: ModuleIndex,
    iterable: cst.BaseExpression,
    is_local: Callable[[cst.BaseExpression], bool],
    depth: int = 0,
) -> bool:
    """Does ``iterable`` have as many items on every process, though they are
    drawn at random there: a draw of a fixed size (``drawn_sizes``) none of
    whose arguments is rank-local by ``is_local`` (the population of
    ``random.sample(xs, k)`` included: one too short raises on some processes
    only), a slice of one with bounds that are not (``torch.randperm(n)[:k]``),
    its ``.tolist()``, ``enumerate``/``list``/``sorted``... of one, or a name
    bound once to one and read only by loops (``_only_looped``)? The
    divergence analysis asks it of a ``for``: such a loop makes as many turns
    on every process, so its body is no branch; its items stay rank-local
    (nothing reseeds the random generators alike on every process during
    training: ``runtime.data`` only replays rank 0's torch state to draw a
    sampler's order)."""
    if depth > _DEPTH:
        return False
    if depth == 0:
        # the divergence walk's taint follows a parameter only where a caller
        # passes the rank: a count a caller computes from its share
        # (`def rounds(k)` called with a data-derived `k`, rev19b) may differ,
        # so a function's parameter read by the draw counts as rank-local
        walked = is_local

        def is_local(part: cst.BaseExpression) -> bool:
            return walked(part) or _reads_parameter(index, part)

    if isinstance(iterable, cst.Call):
        func = iterable.func
        args = iterable.args
        if any(a.star for a in args):
            return False
        if isinstance(func, cst.Attribute) and func.attr.value == "tolist":
            return not args and drawn_count(index, func.value, is_local, depth + 1)
        qualnames = index.qualnames(func)
        if qualnames & _SAME_COUNT:
            return (
                len(args) == 1
                and args[0].keyword is None
                and drawn_count(index, args[0].value, is_local, depth + 1)
            )
        if drawn_sizes(qualnames, iterable) is None:
            return False
        return not any(is_local(a.value) for a in iterable.args)
    if isinstance(iterable, cst.Subscript):
        if len(iterable.slice) != 1:
            return False
        part = iterable.slice[0].slice
        if not isinstance(part, cst.Slice):
            return False
        bounds = [b for b in (part.lower, part.upper, part.step) if b is not None]
        return not any(is_local(b) for b in bounds) and drawn_count(
            index, iterable.value, is_local, depth + 1
        )
    if isinstance(iterable, cst.Name):
        key = index.key(iterable)
        values = index.values.get(key, []) if key is not None else []
        return (
            len(values) == 1
            and values[0] is not None
            and _only_looped(index, iterable)
            and _bound_once(index, values[0])
            and drawn_count(index, values[0], is_local, depth + 1)
        )
    return False


def _only_looped(index: ModuleIndex, name: cst.Name) -> bool:
    """Is every other reference to ``name``'s variable, in the file, the
    iterable of a ``for`` (also in ``enumerate(...)``)? Then nothing changes
    it in place (``perm.pop()`` under a test of the data) or hands it on."""
    key = index.key(name)
    for reference in findall(index.module, m.Name(value=name.value)):
        if index.key(reference) != key:
            continue
        parent = index.parent(reference)
        if isinstance(parent, cst.AssignTarget):
            continue  # the one binding
        if isinstance(parent, cst.For) and parent.iter is reference:
            continue
        if isinstance(parent, cst.Arg):
            call = index.parent(parent)
            if (
                isinstance(call, cst.Call)
                and index.qualnames(call.func) & _WRAPPERS
                and isinstance(index.parent(call), cst.For)
            ):
                continue
        return False
    return True


def _reads_parameter(index: ModuleIndex, value: cst.BaseExpression) -> bool:
    """Does ``value`` read a parameter of a function of the file?"""
    for name in findall(value, m.Name()):
        key = index.key(name)  # type: ignore[arg-type]
        if key is None:
            continue
        for function in index.functions:
            if name.value in parameter_names(function) and (  # type: ignore[attr-defined]
                index.function_scope_key(function, name.value) == key  # type: ignore[attr-defined]
            ):
                return True
    return False


def _loop_bound(index: ModuleIndex, key: object) -> bool:
    """Is the variable ``key`` a ``for`` target anywhere in the file (a binding
    ``index.values`` does not list: rev19b's ``for k in range(1)`` between the
    draw and its loop)?"""
    for loop in index.for_loops:
        for name in findall(loop.target, m.Name()):
            if index.key(name) == key:  # type: ignore[arg-type]
                return True
    return False


def _bound_once(index: ModuleIndex, value: cst.BaseExpression) -> bool:
    """Is each variable ``value`` reads bound at most once in the file? Then
    whether it is rank-local where a loop reads the name bound to ``value``
    (``idx = torch.randperm(n)[:k]`` ... ``for i in idx:``) is what it was
    where ``value`` was computed (``k`` rebound from a rank-local value in
    between would be a second binding)."""
    for name in findall(value, m.Name()):
        key = index.key(name)
        if key is not None and (
            len(index.values.get(key, [])) > 1 or _loop_bound(index, key)
        ):
            return False
    return True
