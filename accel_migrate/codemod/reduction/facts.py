"""Facts of loss expressions and how they combine (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..batch_rows import batch_values
from ..names import ELEMENTWISE_LOSSES
from ..names import IGNORING_LOSSES as _IGNORING
from ..patterns import string_value
from ..subtrees import findall
from .held_settings import held_settings, read_off
from .loss_inputs import (
    _SAME_VALUE,
    _selected_rows,
    _targets,
    at_least_2d,
    not_ignored_count,
    packed_sequence,
    writes_default_ignore,
)
from .placement import bound_once, code, pure
from .summed_weights import step_weighted_sum

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

Kind = Literal["mean", "sum", "token-mean", "unknown"]
#: Facts of sub-expressions: also per-element values and batch-independent terms.
_Kind = Literal["mean", "sum", "token-mean", "unknown", "elements", "constant"]

_REDUCED = ("mean", "sum", "token-mean")
#: Functions and methods through which a batch reduction is not one any more.
_NONLINEAR = frozenset(
    {"sqrt", "rsqrt", "log", "log1p", "exp", "pow", "square", "abs", "sigmoid", "tanh"}
    # elementwise with two operands (PPO's clipped surrogate): of a reduction,
    # as non-linear as the others
    | {"maximum", "minimum", "where", "clamp", "clip"}
)
#: ``torch.max(a, b)`` / ``torch.min(a, b)`` of two tensors: elementwise (with a
#: ``dim``, or alone, a reduction: a statistic).
_ELEMENTWISE_OF_TWO = frozenset({"max", "min"})
#: Statistics of the batch other than its sum or mean.
_STATISTICS = frozenset({"var", "std", "var_mean", "std_mean", "median", "logsumexp"})
#: torch constructors: a tensor made from them holds no sample of the batch.
_CONSTRUCTORS = frozenset(
    f"torch.{name}"
    for name in (
        "ones",
        "zeros",
        "full",
        "eye",
        "arange",
        "linspace",
        "tensor",
        "as_tensor",
        "empty",
    )
)


@dataclass(frozen=True)
class Fact:
    """What an expression is. ``kind`` "token-mean" has the ``count`` of tokens
    it averages over, an expression valid where ``anchor`` is evaluated (None
    when none can be written); "unknown" has the ``reason``. "elements" with a
    ``reason`` is a value a model's forward returned whose reduction is not
    seen: per-element inside an expression (``mu.pow(2)``), but where it is the
    loss itself the reduction is not known, for that reason."""

    kind: _Kind
    reason: str = ""
    count: cst.BaseExpression | None = None
    anchor: cst.CSTNode | None = None
    what: str = ""  # for a token mean: what it averages over, for messages
    #: of "elements": the rows of the batch a mask or indices select (code), whose
    #: number differs between the processes' shares: a mean of them is no mean
    #: of the share's samples
    selected: str = ""
    #: of "elements": a per-sample loss (code) whose number of dimensions is not
    #: proven 2 or more: a reduction over a negative dimension may be the batch's
    unranked: str = ""

    @property
    def reduced(self) -> bool:
        return self.kind in _REDUCED


_ELEMENTS = Fact("elements")


def model_output(reason: str) -> Fact:
    """A value a model's forward returned, which may be a loss it reduced in a way
    the analysis does not see (``reason``)."""
    return Fact("elements", reason=reason)


_CONSTANT = Fact("constant")


#: The attributes a ``torch.nn`` loss module reads its reduction from.
_REDUCTION_ATTRIBUTES = frozenset({"reduction", "size_average", "reduce"})


def reduction_rewritten(
    index: ModuleIndex, attributes: frozenset[str] = _REDUCTION_ATTRIBUTES
) -> str:
    """Why a loss object's construction may not say its reduction in this file:
    an assignment of one of ``attributes`` on anything (``criterion.reduction =
    "mean"``), a ``setattr`` of one by its name, or one written through an
    object's ``__dict__``/``vars()`` (``vars(loss).update(size_average=True)``);
    "" where the file does none of these (``vars(args)`` read is no write)."""
    for node in findall(index.module, m.Assign() | m.AugAssign() | m.AnnAssign()):
        targets = (
            [t.target for t in node.targets]  # type: ignore[attr-defined]
            if isinstance(node, cst.Assign)
            else [node.target]  # type: ignore[attr-defined]
        )
        for target in targets:
            if (
                isinstance(target, cst.Attribute)
                and target.attr.value in attributes
                and not _own_setting(index, node, target)
            ):
                return f"and this file assigns `{code(target)}`"
            if (
                isinstance(target, cst.Subscript)
                and _attribute_table(target.value)
                and any(
                    string_value(getattr(e.slice, "value", None)) in attributes
                    for e in target.slice
                )
            ):
                return f"and this file assigns `{code(target)}`"
    for call in findall(index.module, m.Call()):
        assert isinstance(call, cst.Call)
        if m.matches(call.func, m.Name("setattr")) and len(call.args) >= 2:
            if string_value(call.args[1].value) in attributes:
                return f"and this file calls `{code(call)}`"
        if m.matches(call.func, m.Attribute(attr=m.Name("update"))) and (
            _attribute_table(call.func.value)  # type: ignore[attr-defined]
        ):
            keys = {a.keyword.value for a in call.args if a.keyword is not None}
            for arg in call.args:
                if isinstance(arg.value, cst.Dict):
                    keys |= {
                        string_value(e.key)  # type: ignore[attr-defined]
                        for e in arg.value.elements
                        if isinstance(e, cst.DictElement)
                    }
            if keys & attributes:
                return f"and this file calls `{code(call)}`"
    return ""


def _own_setting(index: ModuleIndex, node: cst.CSTNode, target: cst.Attribute) -> bool:
    """``self.reduction = reduction`` in a class's method: that class's own
    instances' setting (a focal loss of the file), read with the class."""
    return m.matches(target.value, m.Name("self")) and any(
        isinstance(a, cst.ClassDef) for a in index.ancestors(node)
    )


def _attribute_table(node: cst.BaseExpression) -> bool:
    """``vars(x)`` or ``x.__dict__``: an object's attributes as a dict."""
    return m.matches(node, m.Call(func=m.Name("vars"))) or m.matches(
        node, m.Attribute(attr=m.Name("__dict__"))
    )


def _loss_call(
    index: ModuleIndex,
    name: str,
    call: cst.Call,
    settings: cst.Call,
    criterion: cst.BaseExpression | None,
    held: bool = False,
) -> Fact:
    """The fact of a loss call; ``settings`` holds its keywords (the call itself,
    or the ``nn.*Loss(...)`` that built the criterion). ``held``: the criterion
    was built elsewhere (handed in as a parameter, built in branches), so its
    ``ignore_index``/``weight`` are read off it (``criterion.ignore_index``)
    where the names they are written with are not the module's."""
    keywords = {a.keyword.value: a.value for a in settings.args if a.keyword}
    if held and criterion is not None:
        keywords = held_settings(index, keywords, criterion)
    spelled = code(criterion) if criterion is not None else f"F.{name}"
    rewritten = reduction_rewritten(index) if criterion is not None else ""
    if rewritten:
        # `criterion.reduction = "mean"` after `nn.MSELoss(reduction="sum")`:
        # the construction no longer says how the call reduces.
        return Fact("unknown", f"`{spelled}` is built as {code(settings)}, {rewritten}")
    unpacked = [a for a in settings.args if a.star == "**"]
    if unpacked:
        # `nn.CrossEntropyLoss(**opts)`: reduction= or ignore_index= may be in it.
        return Fact(
            "unknown",
            f"`{spelled}` takes its settings from `**{code(unpacked[0].value)}`, "
            "which may set its reduction or ignore_index",
        )
    if "reduction" in keywords:
        reduction = string_value(keywords["reduction"])
        if reduction is None:
            return Fact(
                "unknown",
                f"`{spelled}` has reduction=`{code(keywords['reduction'])}`, which is "
                "not written in the file",
            )
    elif m.matches(keywords.get("reduce"), m.Name("False")):
        reduction = "none"
    elif m.matches(keywords.get("size_average"), m.Name("False")):
        reduction = "sum"
    else:
        reduction = "mean"
    if reduction == "none":
        # Per element: of elementwise losses the inputs' shape, of the others
        # (`cross_entropy`) one dimension fewer, per sample when 1-D.
        inputs = [a.value for a in call.args if a.keyword is None][:2] + [
            a.value
            for a in call.args
            if a.keyword and a.keyword.value in ("input", "target")
        ]
        if name in ELEMENTWISE_LOSSES and any(at_least_2d(index, e) for e in inputs):
            return _ELEMENTS
        return Fact("elements", unranked=code(call))
    if reduction == "sum":
        weighted = step_weighted_sum(index, name, call, keywords, spelled)
        return Fact("unknown", weighted) if weighted else Fact("sum")
    if reduction not in ("mean", "batchmean"):
        return Fact("unknown", f"`{spelled}` has reduction={reduction!r}")
    selected = _selected_rows(index, call)
    if selected is not None:
        return Fact(
            "unknown",
            f"`{spelled}` averages over the rows `{code(selected)}` selects (a "
            "boolean mask or indices of the batch, as positives or labelled "
            "samples), a number that differs between the processes' shares, not "
            "over the batch's samples: pass this process's number of them as "
            "accel.backward(count=...), or sum the loss and divide by the global "
            "number",
        )
    if name not in _IGNORING:
        return _packed_mean(index, call, spelled) or Fact("mean")
    if "weight" in keywords and not m.matches(keywords["weight"], m.Name("None")):
        return _weighted_mean(index, call, keywords, spelled, criterion)
    ignore = keywords.get("ignore_index")
    if ignore is None:
        if not writes_default_ignore(index):
            return _packed_mean(index, call, spelled) or Fact("mean")
        # Labels padded with -100 (Hugging Face's convention) are skipped by the
        # default ignore_index: a mean over the other tokens, of a different count
        # on each process. Counting them is exact also where none is -100.
        ignore = cst.UnaryOperation(operator=cst.Minus(), expression=cst.Integer("100"))
    targets = _targets(call)
    what = f"the targets that are not `ignore_index` ({code(ignore)}) of `{spelled}`"
    if (
        len(targets) != 1
        or not pure(targets[0])
        or not pure(ignore)
        or not (read_off(ignore, criterion) or bound_once(index, ignore))
    ):
        return Fact("token-mean", what=what)
    target = targets[0]
    if not isinstance(target, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    # The names of the target are read at the call, those of ignore_index where
    # the criterion was built (usually a module-level constant).
    return Fact(
        "token-mean", count=not_ignored_count(target, ignore), anchor=call, what=what
    )


def _weighted_mean(
    index: ModuleIndex,
    call: cst.Call,
    keywords: dict,
    spelled: str,
    criterion: cst.BaseExpression | None,
) -> Fact:
    """A cross-entropy with class ``weight=``: its mean divides by the weights of
    this process's targets (``accel.class_weight_count``, which also tells
    class-probability targets, a mean over samples, at run time). The weights are
    read as written (``weight=class_weights``) or from the loss module that holds
    them (``criterion.weight``, for ``weight=torch.tensor([...])``)."""
    weight = keywords["weight"]
    local = batch_values(index)
    if any(index.key(n) in local for n in findall(weight, m.Name())):  # type: ignore[arg-type]
        # `weight=1.0 / torch.bincount(y)`: each process weighs by its own share's
        # classes, the original by the whole batch's; no count makes up for that.
        return Fact(
            "unknown",
            f"`{spelled}` has class weights computed from this process's share of "
            f"the batch (`{code(weight)}`), not from the whole batch as in the "
            "original",
        )
    if not (pure(weight) and bound_once(index, weight)) and criterion is not None:
        weight = cst.Attribute(value=criterion.deep_clone(), attr=cst.Name("weight"))
    ignore = keywords.get("ignore_index")
    what = f"the class weights of the targets of `{spelled}`"
    targets = _targets(call)
    settings = [weight] + ([ignore] if ignore is not None else [])
    if (
        len(targets) != 1
        or not pure(targets[0])
        or not all(
            pure(e) and (read_off(e, criterion) or bound_once(index, e))
            for e in settings
        )
    ):
        return Fact(
            "unknown",
            f"`{spelled}` has class weights: its mean divides by the weights of "
            "this process's targets, not of the global batch's, and the weights or "
            "targets cannot be read again where the loss is backpropagated",
        )
    args = [cst.Arg(weight.deep_clone()), cst.Arg(targets[0].deep_clone())]
    if ignore is not None:
        args.append(cst.Arg(ignore.deep_clone()))
    count = cst.Call(
        func=cst.Attribute(
            value=cst.Name(index.alias), attr=cst.Name("class_weight_count")
        ),
        args=args,
    )
    return Fact("token-mean", count=count, anchor=call, what=what)


def _packed_mean(index: ModuleIndex, call: cst.Call, spelled: str) -> Fact | None:
    """A mean over packed sequences (``criterion(out.data, packed_targets.data)``):
    over the tokens of the batch, whose number is each process's own. Every row
    of the target is counted, so ``target.numel()`` weighs it exactly (for
    class-probability targets it is proportional, which is enough)."""
    inputs = [a.value for a in call.args if a.keyword is None][:1] + [
        a.value for a in call.args if a.keyword and a.keyword.value == "input"
    ]
    targets = _targets(call)
    if not any(packed_sequence(index, e, 0) for e in inputs + targets):
        return None
    what = f"the tokens of the packed sequences of `{spelled}`"
    if len(targets) != 1 or not pure(targets[0]):
        return Fact("token-mean", what=what)
    target = targets[0]
    if not isinstance(target, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    count = cst.Call(func=cst.Attribute(value=target, attr=cst.Name("numel")))
    return Fact("token-mean", count=count, anchor=call, what=what)


#: Names that pad labels with -100 (the default ``ignore_index``) where they are used.


def _constructed(index: ModuleIndex, value: cst.BaseExpression) -> bool:
    """``torch.ones(1).cuda()``: a tensor the script makes, not one of the batch."""
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _SAME_VALUE
    ):
        value = value.func.value
    return isinstance(value, cst.Call) and bool(
        index.qualnames(value.func) & _CONSTRUCTORS
    )


def _added(left: Fact, right: Fact) -> Fact:
    """The fact of ``left + right``."""
    for fact in (left, right):
        if fact.kind == "unknown":
            return fact
    if left.kind == right.kind:
        if left.kind == "token-mean" and not _same_count(left, right):
            return Fact(
                "unknown",
                f"the loss adds means over different counts ({left.what}; {right.what})",
            )
        return _elements_of(left, right, left) if left.kind == "elements" else left
    kinds = {left.kind, right.kind}
    if kinds == {"sum", "constant"}:
        return Fact(
            "unknown",
            "the loss adds a term that does not depend on the batch to a sum over "
            "the batch: each process would add it once",
        )
    if "constant" in kinds:
        return left if right.kind == "constant" else right
    if "elements" in kinds:
        other = left if right.kind == "elements" else right
        if other.kind == "mean":
            return other  # an opaque term next to a mean: a mean, as by default
        return Fact(
            "unknown",
            f"the loss adds a term whose reduction the analysis cannot read to a "
            f"{_kind_name(other)}",
        )
    return Fact(
        "unknown",
        f"the loss mixes reductions: a {_kind_name(left)} plus a {_kind_name(right)}",
    )


def _kind_name(fact: Fact) -> str:
    return {
        "mean": "mean over the batch",
        "sum": "sum over the batch",
        "token-mean": f"mean over {fact.what}",
    }.get(fact.kind, fact.kind)


def _same_count(left: Fact, right: Fact) -> bool:
    if left.count is None or right.count is None:
        return False
    return left.count.deep_equals(right.count) and left.anchor is right.anchor


def _scaled(left: Fact, right: Fact) -> Fact:
    for fact in (left, right):
        if fact.kind == "unknown":
            return fact
    if left.kind == "constant":
        return right
    if right.kind == "constant":
        return left
    if left.reduced and right.reduced:
        return _nonlinear(left, "a product of two batch reductions")
    return _elements_of(left, right, _ELEMENTS)


def _elements_of(left: Fact, right: Fact, plain: Fact) -> Fact:
    """Per-element values combined elementwise: selected rows or a per-sample
    loss of unproven rank in either stay so (broadcast keeps the larger rank,
    so an operand proven 2-D or more could prove it; the analysis does not
    try)."""
    pick = [f for f in (left, right) if f.kind == "elements"]
    selected = next((f.selected for f in pick if f.selected), "")
    unranked = next((f.unranked for f in pick if f.unranked), "")
    if not selected and not unranked:
        return plain
    return Fact("elements", selected=selected, unranked=unranked)


def _nonlinear(fact: Fact, how: str) -> Fact:
    return Fact(
        "unknown",
        f"the loss passes a {_kind_name(fact)} through {how}: each process would "
        "apply it to its share's value, not to the global batch's",
    )


def _agree(facts: list[Fact]) -> Fact | None:
    if not facts:
        return None
    first = facts[0]
    for fact in facts[1:]:
        if fact.kind != first.kind:
            return None
        if fact.kind == "token-mean" and not _same_count(first, fact):
            return None
    return first


def _same_region(index: ModuleIndex, node: cst.CSTNode, at: cst.CSTNode) -> bool:
    """Are ``node`` and ``at`` in the same innermost loop (or function)?"""

    def region(n: cst.CSTNode) -> cst.CSTNode | None:
        for ancestor in index.ancestors(n):
            if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
                return ancestor
        return None

    return region(node) is region(at)


def _setting(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``args.batch_size``, ``config.accum``, a name set to a number or to one of
    those: a setting of the run, the same for every batch."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.Attribute):
        chain = attr_chain(expr)
        return chain is not None and expr.attr.value not in ("shape", "data", "grad")
    key = index.key(expr) if isinstance(expr, cst.Name) and depth < 3 else None
    if key is None:
        return False
    values = index.values.get(key, ())
    return bool(values) and all(
        v is not None and _setting(index, v, depth + 1) for v in values
    )


def _counts_samples(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0
) -> bool:
    """``x.size(0)``, ``x.size()[0]``, ``len(x)``, ``x.shape[0]``,
    ``x.numel()``, also through a variable set to one, and one times a number
    (``x.size()[0] * 2``: DnCNN's ``sum / (2 * N)`` is a mean halved). A sum is
    not a count of samples here."""
    if m.matches(
        expr,
        m.Call(func=m.Attribute(attr=m.Name("size")), args=[m.Arg(m.Integer("0"))]),
    ) or m.matches(expr, m.Call(func=m.Attribute(attr=m.Name("numel")), args=[])):
        return True
    if m.matches(
        expr,
        m.Subscript(
            value=m.Call(func=m.Attribute(attr=m.Name("size")), args=[]),
            slice=[m.SubscriptElement(m.Index(m.Integer("0")))],
        ),
    ):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(
        expr.operator, cst.Multiply
    ):
        number = m.Integer() | m.Float()
        for count, other in ((expr.left, expr.right), (expr.right, expr.left)):
            if m.matches(other, number) and _counts_samples(index, count, depth):
                return True
    if isinstance(expr, cst.Call) and "builtins.len" in index.qualnames(expr.func):
        return True
    if m.matches(
        expr,
        m.Subscript(
            value=m.Attribute(attr=m.Name("shape")),
            slice=[m.SubscriptElement(m.Index(m.Integer("0")))],
        ),
    ):
        return True
    if isinstance(expr, cst.Call) and m.matches(
        expr.func, m.Name("float") | m.Name("int")
    ):
        return len(expr.args) == 1 and _counts_samples(index, expr.args[0].value, depth)
    key = index.key(expr) if isinstance(expr, cst.Name) and depth < 2 else None
    if key is None:
        return False
    values = index.values.get(key, ())
    # `B, N = targets.size()` (mongolian-speech-recognition): the first of
    # `x.size()` or `x.shape` unpacked, every time it is unpacked
    unpacked = index.unpacked.get(key, [])
    rows = m.Call(func=m.Attribute(attr=m.Name("size")), args=[])
    rows |= m.Attribute(attr=m.Name("shape"))
    if sum(v is None for v in values) != len(unpacked) or not all(
        position == 0 and m.matches(v, rows) for v, position, _ in unpacked
    ):
        return False
    return bool(values) and all(
        v is None or _counts_samples(index, v, depth + 1) for v in values
    )
