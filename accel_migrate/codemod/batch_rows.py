"""Random draws shaped by the batch: what ``accel.batch_draw`` can make the original's.

A draw in a training step whose first dimension is the batch's sample count
(``torch.randn(imgs.shape[0], nz)``, ``torch.rand(real.size(0), 1)``,
``np.random.normal(0, 1, (len(x), d))``, a VAE's ``torch.randn_like(std)`` of a
tensor computed from the batch) gives one row to each sample. After sharding,
the runtime can draw the rows of the whole global batch, as the original did,
and hand each process its samples' rows (``accel.batch_draw``). This module
decides which draws are so shaped; AM034 rewrites them and AM020 reports the
rest.

Batch values: the targets of a ``for`` over a data loader (not an
``enumerate`` counter), variables assigned from an expression that reads one
(``real = imgs.to(device)``, ``mu, logvar = model(data)``), the parameters of a
local function that every call passes one (``compute_gradient_penalty(D,
real_imgs.data, fake)``), and the parameters of a model class's ``forward``
(and of the methods it calls on ``self``) when every call of the model in the
file passes batch values. The row count must be read off a batch value
(``x.size(0)``, ``x.shape[0]``, ``len(x)``, a variable every assignment of
which is one, or a parameter every call of which passes one); a ``*_like`` draw's tensor must be a batch value. The runtime
checks the count against the process's share of the current batch and draws
as asked where they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import libcst as cst
import libcst.matchers as m

from .analysis import Key, ModuleIndex, bind_arguments
from .model_methods import forward_methods, model_classes, stepped_classes
from .subtrees import findall

#: Draws taking their shape as ``*sizes`` or one tuple (``randn(b, d)``, ``randn((b, d))``).
_SIZES_FIRST = frozenset(
    {"torch.randn", "torch.rand", "numpy.random.rand", "numpy.random.randn"}
)
#: Draws taking their shape as a ``size`` argument at a position (or ``size=``).
_SIZE_AT = {
    "torch.randint": -1,  # randint(high, size) / randint(low, high, size)
    "torch.normal": None,  # normal(mean, std, size=...) only
    "numpy.random.normal": 2,
    "numpy.random.uniform": 2,
    "numpy.random.randint": 2,
    "numpy.random.beta": 2,
    "numpy.random.random": 0,
    "numpy.random.random_sample": 0,
    "numpy.random.standard_normal": 0,
}
#: Draws shaped like their first argument.
LIKE_DRAWS = frozenset({"torch.randn_like", "torch.rand_like", "torch.randint_like"})


@dataclass(frozen=True)
class RowsDraw:
    """A draw whose first dimension is the batch's sample count."""

    #: The qualified name of the draw (``torch.randn``).
    name: str
    #: Where the row count is in the call: (argument index, element index of a
    #: tuple/list argument, or None for the argument itself); None for a ``*_like``.
    rows_at: tuple[int, int | None] | None


def rows_draw(index: ModuleIndex, call: cst.Call) -> RowsDraw | None:
    """The batch-shaped draw ``call`` is, or None."""
    names = index.qualnames(call.func)
    if any(arg.star for arg in call.args):
        return None
    for name in sorted(names):
        if name in LIKE_DRAWS:
            first = call.args[0] if call.args else None
            if (
                first is not None
                and first.keyword is None
                and _is_batch(index, first.value)
            ):
                return RowsDraw(name, None)
            return None
        place = _size_place(name, call)
        if place is None:
            continue
        expr = _at(call, place)
        if expr is not None and counts_batch(index, expr):
            return RowsDraw(name, place)
        if place[1] is None and expr is not None:
            shaped = shape_of(expr)
            if shaped is not None and _is_batch(index, shaped):
                # `size=x.size()`: the whole shape of a batch value
                return RowsDraw(name, (place[0], WHOLE_SHAPE))
        return None
    return None


#: ``RowsDraw.rows_at``'s element for a size that is a batch value's whole shape.
WHOLE_SHAPE = -1


def shape_of(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """``x`` of ``x.size()`` or ``x.shape``; None otherwise."""
    if (
        isinstance(expr, cst.Call)
        and not expr.args
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "size"
    ):
        return expr.func.value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "shape":
        return expr.value
    return None


def _size_place(name: str, call: cst.Call) -> tuple[int, int | None] | None:
    args = call.args
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == "size":
            return (i, 0) if isinstance(arg.value, (cst.Tuple, cst.List)) else (i, None)
    positional = [i for i, arg in enumerate(args) if arg.keyword is None]
    if name in _SIZES_FIRST:
        if not positional:
            return None
        first = args[positional[0]].value
        return (
            (positional[0], 0)
            if isinstance(first, (cst.Tuple, cst.List))
            else (positional[0], None)
        )
    if name not in _SIZE_AT or _SIZE_AT[name] is None:
        return None
    at = _SIZE_AT[name]
    assert at is not None
    if name == "torch.randint":
        if len(positional) < 2:
            return None
        at = len(positional) - 1
    if at >= len(positional):
        return None
    size = args[positional[at]].value
    if isinstance(size, (cst.Tuple, cst.List)):
        return (positional[at], 0)
    # randint's size is a tuple (or a batch value's `x.size()`); numpy's may be
    # a plain count.
    if name == "torch.randint" and shape_of(size) is None:
        return None
    return (positional[at], None)


def _at(call: cst.Call, place: tuple[int, int | None]) -> cst.BaseExpression | None:
    arg, element = place
    value = call.args[arg].value
    if element is None:
        return value
    assert isinstance(value, (cst.Tuple, cst.List))
    items = value.elements
    if not items or isinstance(items[0], cst.StarredElement):
        return None
    return items[0].value


def counts_batch(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Does ``expr`` count the rows of this process's batch (``x.size(0)``,
    ``len(y)``, ``x.shape[0]`` of a batch value, or a variable every assignment
    of which is one)? Not ``len(loader)``, which every process counts alike."""
    from .rules.sample_counters import counted_batch  # the rules import this module

    counted = counted_batch(expr, index.qualnames)
    if counted is not None:
        return _is_batch(index, counted)
    key = index.key(expr) if isinstance(expr, cst.Name) else None
    if key is None or depth > 2:
        return False
    values = index.values.get(key, [])
    if not values:
        return _passed_counts(index, key, depth)
    return all(v is not None and counts_batch(index, v, depth + 1) for v in values)


def divided_by_rows(index: ModuleIndex, read: cst.BaseExpression) -> bool:
    """``float(l) / labels.shape[0]`` (d2l's train_ch13 loss sum): ``read``
    divided by this process's count of its batch's rows (``counts_batch``; not
    ``len(loader)``). For AM008: reducing the sum alone would divide the global
    sum by the share's count."""
    parent = index.parent(read)
    return (
        isinstance(parent, cst.BinaryOperation)
        and isinstance(parent.operator, cst.Divide)
        and parent.left is read
        and counts_batch(index, parent.right)
    )


def _passed_counts(index: ModuleIndex, key: Key, depth: int) -> bool:
    """Is ``key`` a parameter of a function of the file that every call fills
    with a count of a batch's rows? Diffusion-Models-pytorch's
    ``sample_timesteps(self, n)``, drawing ``torch.randint(low=1, high=T,
    size=(n,))``, called as ``self.sample_timesteps(images.shape[0])``."""
    for function in index.functions:
        names = [
            p.name.value
            for p in [*function.params.posonly_params, *function.params.params]
        ]
        name = next(
            (n for n in names if index.function_scope_key(function, n) == key), None
        )
        if name is None:
            continue
        calls = index.call_sites(function)
        bound = 1 if index.enclosing_class(function.name) is not None else 0
        passed = [
            dict(bind_arguments(function, bound, call)).get(name) for call in calls
        ]
        return bool(passed) and all(
            value is not None and counts_batch(index, value, depth + 1)
            for value in passed
        )
    return False


def _is_batch(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    key = index.key(expr)
    return key is not None and key in batch_values(index)


def loader_loop_items(index: ModuleIndex) -> Iterator[cst.BaseExpression]:
    """What each loop over a data loader binds, its ``enumerate`` counter left
    out: the loop's target, or the target's items after the counter."""
    for _, item in loader_loop_bindings(index):
        yield item


def loader_loop_bindings(
    index: ModuleIndex,
) -> Iterator[tuple[cst.For, cst.BaseExpression]]:
    """``loader_loop_items``, each with the loop that binds it."""
    for loop in index.for_loops:
        is_loader, counter = index.loader_loop(loop.iter)
        if not is_loader:
            continue
        target = loop.target
        if counter and isinstance(target, cst.Tuple):
            yield from ((loop, element.value) for element in target.elements[1:])
        else:
            yield loop, target


@lru_cache(maxsize=8)
def batch_values(index: ModuleIndex) -> frozenset[Key]:
    """The variables that hold a share of a batch, or values computed from one."""
    found: set[Key] = set()
    for node in loader_loop_items(index):
        for name in findall(node, m.Name()):
            key = index.key(name)  # type: ignore[arg-type]
            if key is not None:
                found.add(key)
    if not found:
        return frozenset()

    def reads(expr: cst.BaseExpression | None) -> bool:
        if expr is None:
            return False
        for node in findall(expr, m.Name() | m.Attribute(value=m.Name("self"))):
            key = index.key(node)  # type: ignore[arg-type]
            if key is not None and key in found:
                return True
        return False

    forwards = _forward_calls(index)
    changed = True
    while changed:
        changed = False
        for key, values in index.values.items():
            if key not in found and any(reads(v) for v in values):
                found.add(key)
                changed = True
        for key, sources in index.unpacked.items():
            if key not in found and any(reads(value) for value, _, _ in sources):
                found.add(key)
                changed = True
        for function in index.functions:
            calls = index.call_sites(function) + forwards.get(function, [])
            if not calls:
                continue
            for key in _every_call_passes(index, function, calls, reads):
                if key not in found:
                    found.add(key)
                    changed = True
    return frozenset(found)


def _every_call_passes(
    index: ModuleIndex,
    function: cst.FunctionDef,
    calls: list[cst.Call],
    reads: Callable[[cst.BaseExpression | None], bool],
) -> list[Key]:
    """Parameters of ``function`` that every one of ``calls`` fills with a batch value."""
    bound = 1 if index.enclosing_class(function.name) is not None else 0
    passed = [dict(bind_arguments(function, bound, call)) for call in calls]
    return [
        index.function_scope_key(function, param.name.value)
        for param in [*function.params.posonly_params, *function.params.params][bound:]
        if all(reads(values.get(param.name.value)) for values in passed)
    ]


def _forward_calls(index: ModuleIndex) -> dict[cst.FunctionDef, list[cst.Call]]:
    """For ``forward`` of each model class a step calls: the calls of its models
    (``model(data)``); for the methods ``forward`` calls on ``self``: those calls."""
    result: dict[cst.FunctionDef, list[cst.Call]] = {}
    for cls in stepped_classes(index):
        methods = forward_methods(cls)
        forward = next((f for f in methods if f.name.value == "forward"), None)
        if forward is None:
            continue
        result[forward] = [
            call for call in index.calls if cls in model_classes(index, call.func)
        ]
    return result
