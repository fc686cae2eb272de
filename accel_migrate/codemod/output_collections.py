"""The output collections of AM029 (``collected_outputs``): which statements
of a loop collect one value per sample (or per batch) of the model's outputs
into a list (``xs += v.tolist()``, ``xs.extend(v)``, ``xs.append(v)``, ``xs +=
[v]``), and
whether what they collect keeps one value per sample (``outputs_like``) or is
a selection of rows, reported and never gathered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst
import libcst.matchers as m

from .analysis import ModuleIndex, attr_chain
from .names import ROW_JOINS
from .subtrees import findall

#: Methods that keep one value per sample (or per row) of what they are called on.
_PER_SAMPLE_METHODS = frozenset(
    {
        "cpu",
        "cuda",
        "detach",
        "numpy",
        "tolist",
        "clone",
        "to",
        "float",
        "double",
        "half",
        "long",
        "int",
        "bool",
        "squeeze",
        "flatten",
        "view",
        "reshape",
        "argmax",
        "argmin",
        "softmax",
        "log_softmax",
        "sigmoid",
        "exp",
        "round",
        "contiguous",
    }
)
#: Of those, methods that reduce everything to one value when given no dimension.
_NEED_DIM = frozenset({"argmax", "argmin", "softmax", "log_softmax"})

Granularity = Literal["sample", "batch"]


@dataclass(frozen=True)
class Collection:
    statement: cst.CSTNode  # the AugAssign, or the append/extend call
    name: str
    granularity: Granularity
    #: Not one value per sample: a selection (``idx[pred != y].tolist()``) or a
    #: value the rule does not know keeps the rows. Reported, never gathered.
    selection: bool = False
    #: The list is also bound to something other than an empty list
    #: (``all_preds = np.array(all_preds)`` after the loop): gathered only when it
    #: is proven empty each time the loop starts (``empty_at_start``).
    rebound: bool = False
    #: One value per batch that is an integer item (``firsts += [out[0]]``): one
    #: output of several (its rows) or the batch's first row; reported.
    item: bool = False


def outputs_like(value: cst.BaseExpression) -> bool:
    """An expression that keeps one value per sample of what it starts from: a
    name, a call (``model(x)``), a subscript, through methods such as ``.cpu()``,
    ``.argmax(1)``, ``.tolist()``; never ``.item()``, ``.sum()`` or arithmetic."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        method = value.func.attr.value
        if method not in _PER_SAMPLE_METHODS:
            return False
        if method in _NEED_DIM and not value.args:
            return False
        value = value.func.value
    if isinstance(value, cst.Call) and attr_chain(value.func) in {"list"}:
        return len(value.args) == 1 and outputs_like(value.args[0].value)
    if isinstance(value, cst.Subscript):
        return all(_keeps_rows(e.slice) for e in value.slice) and outputs_like(
            value.value
        )
    return isinstance(value, (cst.Name, cst.Call, cst.Attribute))


def _keeps_rows(index: cst.BaseSlice) -> bool:
    """``out[0]`` (one output of several), ``x[:, 1]``, ``batch["logits"]``: not a
    selection of rows by a mask or a list of indices."""
    if isinstance(index, cst.Slice):
        return index.lower is None and index.upper is None and index.step is None
    value = index.value  # type: ignore[attr-defined]
    return isinstance(value, (cst.Integer, cst.SimpleString)) or (
        isinstance(value, cst.UnaryOperation)
        and isinstance(value.expression, cst.Integer)
    )


def collection_of(index: ModuleIndex, node: cst.CSTNode) -> Collection | None:
    """``node`` collects outputs into a list variable: ``xs += v.tolist()``,
    ``xs.extend(v)``, ``xs.append(v)`` (or ``xs += [v]``, one per batch) with ``v`` outputs-like (``outputs_like``),
    where ``xs`` is bound to an empty list (and, where also bound to something
    else, ``Collection.rebound``), never to the runtime's gather of it."""
    if isinstance(node, cst.AugAssign):
        if not isinstance(node.operator, cst.AddAssign):
            return None
        target, value, granularity = node.target, node.value, "sample"
        single = single_element(value)
        if single is not None:
            # `xs += [v]` appends one value per batch, as `xs.append(v)` does
            # (the Kaggle notebooks' `image_preds_all += [p.cpu().numpy()]`)
            value, granularity = single, "batch"
    elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method not in {"append", "extend"} or len(node.args) != 1:
            return None
        arg = node.args[0]
        if arg.star or arg.keyword is not None:
            return None
        target, value = node.func.value, arg.value
        granularity = "batch" if method == "append" else "sample"
    else:
        return None
    if not isinstance(target, cst.Name):
        return None
    listed = m.matches(
        value,
        m.Call(func=m.Attribute(attr=m.Name("tolist"))) | m.Call(func=m.Name("list")),
    )
    if isinstance(node, cst.AugAssign) and granularity == "sample" and not listed:
        return None  # `xs += v` takes a list on the right: `.tolist()` or `list(...)`
    selection = not outputs_like(value)
    if selection and granularity == "batch":
        return None  # a number per batch (`losses.append(loss.item())`): AM009's
    item = granularity == "batch" and _integer_item(value)
    key = index.key(target)
    values = index.values.get(key, []) if key is not None else []
    if not any(empty_list(v) for v in values):
        return None
    if any(index.is_runtime_call(v, "gather_in_order", "gather") for v in values):
        return None  # gathered already (a second run over the migrated code)
    rebound = not all(empty_list(v) for v in values)
    return Collection(
        node, target.value, granularity, selection or item, rebound, item  # type: ignore[arg-type]
    )


def _integer_item(value: cst.BaseExpression) -> bool:
    """``out[0]`` (through per-sample methods: ``out[0].cpu()``), item 0 of a
    name not proven a tuple or list: a model's first output (one per sample) or
    the batch's first row (one per batch) alike. An item of a call
    (``model(imgs)[1]``) or another integer item (``out[1]``, ``out[-1]``) is
    one output of several as written in real code (a ReID model's ``logits,
    feats``): gathered per batch, where the runtime's ``GatherOrderError`` is
    the guard if it is a row after all (a share of rows checked per batch)."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
        value = value.func.value
    if not isinstance(value, cst.Subscript) or isinstance(
        value.value, (cst.Tuple, cst.List, cst.Call)
    ):
        return False
    first = value.slice[0].slice
    return (
        len(value.slice) == 1
        and isinstance(first, cst.Index)
        and m.matches(first.value, m.Integer("0"))
    )


def single_element(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """``v`` of a one-element list display ``[v]`` (not ``[*v]``)."""
    if isinstance(value, cst.List) and len(value.elements) == 1:
        element = value.elements[0]
        if isinstance(element, cst.Element):
            return element.value
    return None


def empty_list(value: cst.BaseExpression | None) -> bool:
    if isinstance(value, cst.List):
        return not value.elements
    return m.matches(value, m.Call(func=m.Name("list"), args=[]))


def collections_in(index: ModuleIndex, loop: cst.For) -> list[Collection]:
    """The output collections in ``loop``'s body (nested statements included)."""
    found = []
    for node in findall(loop.body, m.AugAssign() | m.Call(func=m.Attribute())):
        collection = collection_of(index, node)
        if collection is not None:
            found.append(collection)
    return found


def concatenated_outputs(
    index: ModuleIndex, loop: cst.For
) -> list[tuple[cst.Assign, str, str]]:
    """The statements of ``loop``'s body that grow a tensor (or array) by
    joining it with a value of each batch, ``gt = torch.cat((gt, target), 0)``
    (arnoweng/CheXNet's whole-set AUROC) or ``preds = np.concatenate([preds,
    p])``, with the name bound outside the loop too (its start, an empty
    ``torch.FloatTensor()``): over a sharded loader it ends with this process's
    share of the rows. (statement, name, the join as written) each."""
    found = []
    for node in findall(loop.body, m.Assign()):
        assert isinstance(node, cst.Assign)
        if len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            continue
        name = node.targets[0].target.value
        value = node.value
        if (
            not isinstance(value, cst.Call)
            or not index.qualnames(value.func) & ROW_JOINS
        ):
            continue
        appended = bool(index.qualnames(value.func) & {"numpy.append"})
        if not _first_dimension(value, 2 if appended else 1):
            continue
        pieces = value.args[0].value if value.args else None
        if appended:
            first = pieces
        elif isinstance(pieces, (cst.Tuple, cst.List)) and pieces.elements:
            first = pieces.elements[0].value
        else:
            continue
        if not m.matches(first, m.Name(name)):
            continue
        key = index.key(node.targets[0].target)
        values = index.values.get(key, []) if key is not None else []
        if len(values) < 2:
            continue  # not bound before the loop: a value of this batch only
        found.append((node, name, cst.Module([]).code_for_node(value.func)))
    return found


def _first_dimension(call: cst.Call, place: int) -> bool:
    """The join is along the first dimension (its default, or 0 given), the
    dimension given at positional ``place`` or by keyword: ``np.append(preds,
    p)`` (``place`` 2, no axis: both flattened, a join of their rows of
    numbers too) or ``np.append(preds, p, axis=0)``."""
    for position, arg in enumerate(call.args):
        named = arg.keyword.value if arg.keyword is not None else ""
        if named in ("dim", "axis") or (arg.keyword is None and position == place):
            return m.matches(arg.value, m.Integer("0"))
    return True


def rows_loop(
    index: ModuleIndex, collection: Collection, loop: cst.For
) -> cst.For | None:
    """The loop between ``collection``'s statement and the loader ``loop`` that
    walks the rows of one of the batch's tensors, once each (SQuAD's ``for i,
    example_index in enumerate(example_indices):
    all_results.append(RawResult(...))``): an ``append`` (or ``+= [v]``) there
    collects one value per sample, in the rows' order. None where there is no
    such loop, another loop too, or the collection adds several values a turn.

    Proven rows: ``enumerate(X)``, ``X``, or ``range(len(X))`` /
    ``range(X.size(0))`` / ``range(X.shape[0])``, where ``X`` is a variable
    ``loop`` binds, proven a tensor (``batch_tensors.tensor_target``: a tensor
    attribute read on it, or a loader over a ``TensorDataset``; a list of
    per-task tensors is walked by task, not by row) and never bound again."""
    from .reduction.batch_tensors import tensor_target

    if collection.granularity != "batch" or collection.item:
        return None
    found: cst.For | None = None
    for ancestor in index.ancestors(collection.statement):
        if ancestor is loop:
            break
        if isinstance(ancestor, (cst.For, cst.While)):
            if found is not None or not isinstance(ancestor, cst.For):
                return None
            found = ancestor
    if found is None or found.orelse is not None or found.asynchronous is not None:
        return None
    walked = _walked(index, found.iter)
    if not isinstance(walked, cst.Name):
        return None
    key = index.key(walked)
    bound = index.batch_tensors.loader_targets.get(key) if key is not None else None
    if not bound or not any(bound_loop is loop for bound_loop, _ in bound):
        return None
    if index.values.get(key) or any(
        index.key(node.target) == key  # type: ignore[attr-defined]
        for node in findall(loop, m.AugAssign(target=m.Name()))
    ):
        return None  # bound again: not the batch's rows any more
    if not tensor_target(index, key, [bound_loop for bound_loop, _ in bound]):
        return None
    return found


def _walked(
    index: ModuleIndex, iterable: cst.BaseExpression
) -> cst.BaseExpression | None:
    """What a loop over ``iterable`` walks the rows of: ``X`` of ``enumerate(X)``
    or ``range(len(X))`` (``X.size(0)``, ``X.shape[0]``), or ``iterable``."""
    if not isinstance(iterable, cst.Call):
        return iterable
    qualnames = index.qualnames(iterable.func)
    if len(iterable.args) != 1 or iterable.args[0].keyword or iterable.args[0].star:
        return None
    arg = iterable.args[0].value
    if "builtins.enumerate" in qualnames:
        return arg
    if "builtins.range" not in qualnames:
        return None
    if isinstance(arg, cst.Call) and "builtins.len" in index.qualnames(arg.func):
        return arg.args[0].value if len(arg.args) == 1 else None
    if m.matches(
        arg,
        m.Call(func=m.Attribute(attr=m.Name("size")), args=[m.Arg(m.Integer("0"))]),
    ):
        return arg.func.value  # type: ignore[attr-defined]
    if m.matches(
        arg,
        m.Subscript(
            value=m.Attribute(attr=m.Name("shape")),
            slice=[m.SubscriptElement(m.Index(m.Integer("0")))],
        ),
    ):
        return arg.value.value  # type: ignore[attr-defined]
    return None
