"""What a loop that collects losses walks: a fixed number of terms, the batch's
samples, or something the analysis cannot tell.

A term appended in a loop counts once per iteration. ``sum`` of a list whose
terms are means is a mean (a mean of means) only where every such loop walks
the same number of items on every process, whatever the batch: ``range(3)``, a
list or tuple display, a constant list or ``nn.ModuleList`` (a model's heads),
``zip``/``enumerate`` of such. A loop over the batch's samples (``range(
x.size(0))``, ``range(len(batch))``, ``targets`` of the loader, ``list(y)``,
``zip(out, targets)``) gives one mean per sample: their sum is a sum over the
batch; a loader's part is read so only where it is proven a tensor
(``batch_tensors``: a default collate keeps a dataset's list of per-task
targets a list, whose loop walks the tasks). A loop over a parsed
command-line option the file never writes (``args.scales``) is fixed.
Anything else (``for o in out`` of a model's output, which may be its
rows or its heads) is neither proven.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import libcst as cst
import libcst.matchers as m

from ..batch_rows import batch_values
from ..subtrees import findall
from .batch_tensors import (
    TENSOR_ATTRIBUTES,
    collated_list,
    parsed_option,
    tensor_target,
)
from .facts import _counts_samples
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

WalkKind = Literal["fixed", "rows", "unknown"]

#: Calls whose result walks what their (first) argument walks.
_SAME = frozenset({"list", "tuple", "reversed", "sorted", "iter"})
#: Calls that build a container of a fixed number of modules or values.
_FIXED_BUILDERS = frozenset({"ModuleList", "ParameterList", "Sequential"})


@dataclass(frozen=True)
class Walk:
    """What a loop walks, with why where it is not proven ("unknown")."""

    kind: WalkKind
    reason: str = ""


def loop_walk(index: ModuleIndex, iterable: cst.BaseExpression, depth: int = 0) -> Walk:
    """What ``iterable`` (a ``for``'s or a comprehension's) walks."""
    fixed = Walk("fixed")
    unknown = Walk(
        "unknown",
        f"the losses are collected in a loop over `{code(iterable)}`, which may walk "
        "the batch's samples (a sum over them) or a fixed number of terms (a mean "
        "of means): the analysis cannot tell which",
    )
    if depth > 4:
        return unknown
    if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)):
        starred = any(isinstance(e, cst.StarredElement) for e in iterable.elements)
        return unknown if starred else fixed
    if isinstance(iterable, cst.Call):
        return _called(index, iterable, depth, unknown)
    if isinstance(iterable, (cst.ListComp, cst.GeneratorExp)):
        walks = [loop_walk(index, f.iter, depth + 1) for f in _fors(iterable)]
        if any(w.kind == "rows" for w in walks) and all(
            w.kind in ("rows", "fixed") for w in walks
        ):
            return Walk("rows")
        return fixed if all(w.kind == "fixed" for w in walks) else unknown
    if isinstance(iterable, cst.Name):
        key = index.key(iterable)
        if key is None:
            return unknown
        bound = index.batch_tensors.loader_targets.get(key)
        if bound is not None:
            loops = [loop for loop, _ in bound]
            if tensor_target(index, key, loops):
                return Walk("rows")
            if collated_list(index, bound, key):
                return fixed  # `return x, [y_a, y_b]`: a list of tasks
            return Walk(
                "unknown",
                f"the losses are collected in a loop over `{code(iterable)}`, a part "
                "of the loader's batch that may be a tensor (a loop over its "
                "samples: a sum over them) or a list of per-task targets (a "
                "default collate keeps a list: a fixed count of tasks, a mean of "
                "means): the analysis cannot tell which",
            )
        values = index.values.get(key, [])
        if values and all(v is not None for v in values):
            walks = [loop_walk(index, v, depth + 1) for v in values]  # type: ignore[arg-type]
            kinds = {w.kind for w in walks}
            if len(kinds) == 1 and kinds != {"unknown"}:
                return walks[0]
        return unknown
    if isinstance(iterable, cst.Attribute):
        if _fixed_attribute(index, iterable) or parsed_option(index, iterable):
            return fixed
        return Walk(
            "unknown",
            f"the losses are collected in a loop over `{code(iterable)}`, an "
            "attribute the file neither binds to a fixed list nor reads from the "
            "parsed command line (a config's list of scales or weights read "
            "elsewhere may hold any count of terms): the analysis cannot tell a "
            "mean of means from a sum over the batch's samples",
        )
    return unknown


def _called(index: ModuleIndex, call: cst.Call, depth: int, unknown: Walk) -> Walk:
    func = call.func
    name = func.value if isinstance(func, cst.Name) else ""
    if isinstance(func, cst.Attribute):
        name = func.attr.value
    args = [a.value for a in call.args if a.keyword is None and not a.star]
    if name == "range" and isinstance(func, cst.Name) and args:
        if all(_constant(index, a) for a in args):
            return Walk("fixed")
        if len(args) == 1:
            return _counted(index, args[0], depth, unknown)
        return unknown
    if index.is_runtime_call(call, "prepare_model") and args:
        return loop_walk(index, args[0], depth + 1)
    if name in _FIXED_BUILDERS:
        # a container of modules: as many as the model was built with, alike
        # on every process and whatever the batch
        return Walk("fixed")
    if isinstance(func, cst.Name) and _returns_fixed(index, func, depth):
        return Walk("fixed")
    if name == "enumerate" and isinstance(func, cst.Name) and args:
        return loop_walk(index, args[0], depth + 1)
    if name == "zip" and isinstance(func, cst.Name) and args:
        return _zipped(index, args, depth, unknown)
    if name in _SAME and isinstance(func, cst.Name) and len(args) == 1:
        inner = loop_walk(index, args[0], depth + 1)
        loader_part = isinstance(args[0], cst.Name) and (
            index.key(args[0]) in index.batch_tensors.loader_targets
        )
        if inner.kind == "unknown" and name in ("list", "tuple") and not loader_part:
            # `list(y)` of a batch tensor walks its rows (a loader's part not
            # proven a tensor may be a list of per-task targets: `inner`); a
            # value of the batch not proven a tensor may be a list too (a
            # model returning its heads' outputs: `outs = model(x)`)
            if not batch_value(index, args[0]):
                return unknown
            if _proven_tensor(index, args[0]):
                return Walk("rows")
            return Walk(
                "unknown",
                f"the losses are collected in a loop over `{code(call)}`, "
                f"which walks the rows of `{code(args[0])}` if it is a tensor or "
                "its items if it is a list (a model returning its heads' "
                "outputs): the file does not show which, and a sum over rows "
                "is a sum over the batch where a sum over heads is not",
            )
        return inner
    if name == "unbind":
        method = isinstance(func, cst.Attribute) and "torch" not in code(func.value)
        target = func.value if method else (args[0] if args else None)  # type: ignore[union-attr]
        dims = args if method else args[1:]
        first = not dims or (len(dims) == 1 and m.matches(dims[0], m.Integer("0")))
        if target is not None and first and batch_value(index, target):
            return Walk("rows")
        return unknown
    if name in ("items", "values", "keys") and isinstance(func, cst.Attribute):
        if not args and _fixed_dict(index, func.value):
            return Walk("fixed")
    return unknown


def _zipped(
    index: ModuleIndex, args: list[cst.BaseExpression], depth: int, unknown: Walk
) -> Walk:
    """``zip`` walks the shortest: fixed where every member is, the samples
    where one is and every other is the batch's (``zip(out, targets)``)."""
    walks = [loop_walk(index, a, depth + 1) for a in args]
    if all(w.kind == "fixed" for w in walks):
        return Walk("fixed")
    if any(w.kind == "rows" for w in walks) and all(
        w.kind == "rows" or batch_value(index, a)
        for w, a in zip(walks, args, strict=True)
    ):
        return Walk("rows")
    return unknown


def _fors(comprehension: cst.ListComp | cst.GeneratorExp) -> list[cst.CompFor]:
    found = []
    loop: cst.CompFor | None = comprehension.for_in
    while loop is not None:
        found.append(loop)
        loop = loop.inner_for_in
    return found


def _constant(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """An integer literal, or a name every binding of which is one."""
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _constant(index, expr.expression, depth)
    if isinstance(expr, cst.BinaryOperation):
        return _constant(index, expr.left, depth) and _constant(
            index, expr.right, depth
        )
    if isinstance(expr, cst.Call) and m.matches(expr.func, m.Name("len")):
        arg = expr.args[0].value if len(expr.args) == 1 else None
        return arg is not None and loop_walk(index, arg, depth + 1).kind == "fixed"
    key = index.key(expr) if isinstance(expr, cst.Name) else None
    values = index.values.get(key, []) if key is not None else []
    return (
        depth < 3
        and bool(values)
        and all(v is not None and _constant(index, v, depth + 1) for v in values)
    )


def _counted(
    index: ModuleIndex, count: cst.BaseExpression, depth: int, unknown: Walk
) -> Walk:
    """What ``range(count)`` walks: ``len(xs)`` what ``xs`` walks;
    ``x.size(0)``/``x.shape[0]`` a tensor's rows; a name every binding of
    which is one of those, what that walks."""
    if isinstance(count, cst.Call) and m.matches(count.func, m.Name("len")):
        if len(count.args) != 1:
            return unknown
        inner = loop_walk(index, count.args[0].value, depth + 1)
        return inner if inner.kind != "unknown" else unknown
    if isinstance(count, cst.Name):
        key = index.key(count)
        values = index.values.get(key, []) if key is not None else []
        if not values or depth > 4 or any(v is None for v in values):
            return unknown
        walks = [_counted(index, v, depth + 1, unknown) for v in values]  # type: ignore[arg-type]
        kinds = {w.kind for w in walks}
        return walks[0] if len(kinds) == 1 else unknown
    if _counts_samples(index, count) and not findall(count, m.Name("len")):
        return Walk("rows")
    return unknown


def _proven_tensor(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """``expr`` is a tensor: a variable bound once that the file reads a
    tensor-only attribute of (``y.size(0)``, ``out.cpu()``:
    ``batch_tensors.tensor_keys``), or a tensor method's result on one
    (``out.argmax(1)``)."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in TENSOR_ATTRIBUTES:
            return True
        expr = expr.func.value
    key = index.key(expr) if isinstance(expr, cst.Name) else None
    # A name bound twice (`outs = model(x)`, later `outs = torch.stack(outs)`)
    # may be a list where it is walked and a tensor where it is read.
    return (
        key is not None
        and key in index.batch_tensors.tensor_keys
        and len(index.values.get(key, ())) <= 1
    )


def batch_value(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """A value of the batch or computed from one (``out = model(x)``)."""
    for node in [expr, *findall(expr, m.Name())]:
        key = index.key(node) if isinstance(node, cst.Name) else None
        if key is not None and key in batch_values(index):
            return True
    return False


def _fixed_attribute(index: ModuleIndex, attribute: cst.Attribute) -> bool:
    """``self.heads`` / ``model.heads``: every assignment of that attribute in
    the file is an ``nn.ModuleList``, a list or tuple display or a fixed
    comprehension."""
    name = attribute.attr.value
    values = [
        a.value
        for a in findall(index.module, m.Assign())
        for t in a.targets  # type: ignore[attr-defined]
        if m.matches(t.target, m.Attribute(attr=m.Name(name)))
    ]
    return bool(values) and all(
        loop_walk(index, value, 1).kind == "fixed" for value in values
    )


def _returns_fixed(index: ModuleIndex, func: cst.Name, depth: int) -> bool:
    """A function of the file every ``return`` of which is a fixed walk
    (``def build_heads(n): return nn.ModuleList(...)``)."""
    functions = [f for f in index.functions if f.name.value == func.value]
    if len(functions) != 1 or depth > 3:
        return False
    returns = [
        r
        for r in findall(functions[0].body, m.Return())
        if not any(
            isinstance(a, (cst.FunctionDef, cst.Lambda)) and a is not functions[0]
            for a in index.ancestors(r)
        )
    ]
    return bool(returns) and all(
        r.value is not None  # type: ignore[attr-defined]
        and loop_walk(index, r.value, depth + 1).kind == "fixed"  # type: ignore[attr-defined]
        for r in returns
    )


def _fixed_dict(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """A dict display, or a name every binding of which is one."""
    if isinstance(expr, cst.Dict):
        return not any(isinstance(e, cst.StarredDictElement) for e in expr.elements)
    key = index.key(expr) if isinstance(expr, cst.Name) else None
    values = index.values.get(key, []) if key is not None else []
    return bool(values) and all(
        isinstance(v, cst.Dict) and _fixed_dict(index, v) for v in values
    )
