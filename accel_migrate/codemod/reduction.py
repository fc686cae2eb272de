"""How a loss reduces its batch: a mean over samples, a sum, or a mean over tokens.

The runtime weighs each process's loss so that the averaged gradient is the
original's over the global batch; the weight depends on this fact (see
``accel_migrate/runtime/loss_share.py``). A shared analysis, so that every rule
that asks (the backward rewrite, logged losses) gets the same answer:

- a loss function's ``reduction=`` (``F.*`` losses and ``nn.*Loss`` modules,
  also a criterion made once and called later), ``size_average=False``,
  ``reduce=False``; ``ignore_index=`` of a mean makes it a mean over the
  targets that are not ignored (tokens), and so does a masked mean
  ``(l * mask).sum() / mask.sum()``;
- explicit sums and means (``torch.sum(x)``, ``x.sum()``, ``.mean()``; over
  dimension 0 or all of them, not per-sample ones like ``.sum(1)``);
- how terms combine: ``a + b``, times or over a constant, a sum over the
  batch size (``/ len(x)``: a mean), through variables and through the
  returns of this file's functions (``def loss_function(...): return BCE + KLD``).

Nothing is a mean over tokens without ``ignore_index`` or a mask: a plain
``cross_entropy`` of ``(batch * time, vocab)`` logits averages over samples
of one length. (``cross_entropy``'s default ``ignore_index=-100`` is assumed to
match no target.) Where nothing says otherwise a loss is a mean over samples,
the default of every ``torch.nn`` loss.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import libcst as cst
import libcst.matchers as m

from .analysis import attr_chain, variable_names
from .patterns import string_value

if TYPE_CHECKING:
    from .analysis import Key, ModuleIndex

Kind = Literal["mean", "sum", "token-mean", "unknown"]
#: Facts of sub-expressions: also per-element values and batch-independent terms.
_Kind = Literal["mean", "sum", "token-mean", "unknown", "elements", "constant"]

_REDUCED = ("mean", "sum", "token-mean")
#: ``torch.nn.functional`` losses, and the position of their target argument.
_FUNCTIONAL_LOSSES = frozenset(
    {
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "cosine_embedding_loss",
        "cross_entropy",
        "ctc_loss",
        "gaussian_nll_loss",
        "hinge_embedding_loss",
        "huber_loss",
        "kl_div",
        "l1_loss",
        "margin_ranking_loss",
        "mse_loss",
        "multi_margin_loss",
        "multilabel_margin_loss",
        "multilabel_soft_margin_loss",
        "nll_loss",
        "poisson_nll_loss",
        "smooth_l1_loss",
        "soft_margin_loss",
        "triplet_margin_loss",
    }
)
#: Losses whose mean skips the targets equal to ``ignore_index``.
_IGNORING = frozenset({"cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"})
#: Methods that keep what a value is (shape, dtype, device, autograd).
_SAME_VALUE = frozenset(
    {
        "clone",
        "contiguous",
        "cpu",
        "cuda",
        "detach",
        "double",
        "flatten",
        "float",
        "half",
        "item",
        "reshape",
        "squeeze",
        "to",
        "type_as",
        "unsqueeze",
        "view",
        "view_as",
        "bfloat16",
    }
)
#: Methods that are safe to evaluate a second time in a count.
_PURE = _SAME_VALUE | {"long", "int", "ne", "eq", "bool", "sum"}


@dataclass(frozen=True)
class Fact:
    """What an expression is. ``kind`` "token-mean" has the ``count`` of tokens
    it averages over, an expression valid where ``anchor`` is evaluated (None
    when none can be written); "unknown" has the ``reason``."""

    kind: _Kind
    reason: str = ""
    count: cst.BaseExpression | None = None
    anchor: cst.CSTNode | None = None
    what: str = ""  # for a token mean: what it averages over, for messages

    @property
    def reduced(self) -> bool:
        return self.kind in _REDUCED


@dataclass(frozen=True)
class LossReduction:
    """The reduction of a backpropagated loss, for the runtime call at ``at``.

    ``count``: for a token mean, the count expression to pass there, or None
    with ``reason`` saying why none can be written."""

    kind: Kind
    reason: str = ""
    count: cst.BaseExpression | None = None
    what: str = ""  # for a token mean: what it averages over


_ELEMENTS = Fact("elements")
_CONSTANT = Fact("constant")


def loss_reduction(
    index: ModuleIndex, loss: cst.BaseExpression, at: cst.CSTNode
) -> LossReduction:
    """The reduction of ``loss`` (an expression of the original tree) as seen
    by the call ``at`` that backpropagates or logs it."""
    fact = _Reducer(index).fact(loss, at, 0)
    if fact.kind == "unknown":
        return LossReduction("unknown", fact.reason)
    if fact.kind == "sum":
        return LossReduction("sum")
    if fact.kind != "token-mean":
        return LossReduction("mean")
    if fact.count is None or fact.anchor is None:
        return LossReduction(
            "token-mean", fact.reason or _unplaceable(fact), what=fact.what
        )
    blocker = _placement_blocker(index, fact.count, fact.anchor, at)
    if blocker is not None:
        return LossReduction(
            "token-mean", f"{_unplaceable(fact)} ({blocker})", what=fact.what
        )
    return LossReduction("token-mean", count=fact.count.deep_clone(), what=fact.what)


def _unplaceable(fact: Fact) -> str:
    return (
        f"the loss is a mean over {fact.what}, and this process's count of them "
        "cannot be written where it is backpropagated"
    )


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


class _Reducer:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index

    @cached_property
    def _augmented(self) -> dict[Key, list[cst.AugAssign]]:
        """``total += term``: the terms added to a variable (``index.values`` has
        only its plain assignments)."""
        found: dict[Key, list[cst.AugAssign]] = {}
        for node in m.findall(self.index.module, m.AugAssign()):
            assert isinstance(node, cst.AugAssign)
            key = self.index.key(node.target)
            if key is not None:
                found.setdefault(key, []).append(node)
        return found

    # -- leaves ---------------------------------------------------------------------
    def fact(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> Fact:
        if depth > 6:
            return _ELEMENTS
        if isinstance(expr, (cst.Integer, cst.Float)):
            return _CONSTANT
        if isinstance(expr, (cst.Name, cst.Attribute)):
            return self._variable(expr, at, depth)
        if isinstance(expr, cst.UnaryOperation):
            return self.fact(expr.expression, at, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self._binary(expr, at, depth)
        if isinstance(expr, cst.Call):
            return self._call(expr, at, depth)
        return _ELEMENTS

    def _variable(
        self, expr: cst.Name | cst.Attribute, at: cst.CSTNode, depth: int
    ) -> Fact:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return self.fact(expr.value, at, depth)
        key = self.index.key(expr)
        if key is None:
            return _ELEMENTS
        values = [v for v in self.index.values.get(key, ()) if v is not None]
        increments = [
            a
            for a in self._augmented.get(key, ())
            if isinstance(a.operator, (cst.AddAssign, cst.SubtractAssign))
        ]
        if not values:
            return _ELEMENTS
        facts = [self.fact(v, v, depth + 1) for v in values]
        chosen = _agree(facts)
        if chosen is None:
            # Several assignments: those in the loop or function of the use.
            near = [
                f
                for v, f in zip(values, facts, strict=True)
                if _same_region(self.index, v, at)
            ]
            chosen = _agree(near) if near else None
        if chosen is None:
            return Fact(
                "unknown",
                f"`{_code(expr)}` is assigned losses of different reductions",
            )
        for increment in increments:
            chosen = _added(chosen, self.fact(increment.value, increment, depth + 1))
        return chosen

    # -- operators --------------------------------------------------------------------
    def _binary(self, expr: cst.BinaryOperation, at: cst.CSTNode, depth: int) -> Fact:
        left = self.fact(expr.left, at, depth + 1)
        right = self.fact(expr.right, at, depth + 1)
        op = expr.operator
        if isinstance(op, (cst.Add, cst.Subtract)):
            return _added(left, right)
        if isinstance(op, cst.Multiply):
            for a, b, b_expr in ((left, right, expr.right), (right, left, expr.left)):
                if a.kind == "mean" and _counts_samples(self.index, b_expr):
                    return Fact("sum")  # a batch mean times the batch size
                if a.reduced and b.kind in ("constant", "elements"):
                    # A weight of a reduced loss (`0.5 * kld`, `args.alpha * loss`).
                    return a
            return _scaled(left, right)
        if isinstance(op, cst.Divide):
            return self._divided(left, right, expr.right)
        if isinstance(op, cst.Power) and left.reduced:
            return _nonlinear(left, f"`{_code(expr)}`")
        return _scaled(left, right)

    def _divided(self, left: Fact, right: Fact, divisor: cst.BaseExpression) -> Fact:
        if left.kind == "sum":
            if right.kind == "sum":
                # `(l * mask).sum() / mask.sum()`: a mean over what the mask counts.
                anchor = self._anchor(divisor)
                return Fact(
                    "token-mean",
                    count=divisor,
                    anchor=anchor,
                    what=f"the elements `{_code(divisor)}` counts",
                )
            if _counts_samples(self.index, divisor):
                return Fact("mean")
            if right.kind == "constant" or _setting(self.index, divisor):
                return left
            return Fact(
                "unknown",
                f"a sum over the batch is divided by `{_code(divisor)}`, which the "
                "analysis cannot tell apart as this process's count or a constant",
            )
        if left.kind in ("mean", "token-mean", "constant", "unknown"):
            return left  # `/ accumulation_steps`: a mean stays a mean
        return _ELEMENTS

    def _anchor(self, expr: cst.BaseExpression) -> cst.CSTNode:
        return expr

    # -- calls ------------------------------------------------------------------------
    def _call(self, call: cst.Call, at: cst.CSTNode, depth: int) -> Fact:
        func = call.func
        names = self.index.qualnames(func)
        functional = {
            n.rsplit(".", 1)[1]
            for n in names
            if n.startswith("torch.nn.functional.")
            and n.rsplit(".", 1)[1] in _FUNCTIONAL_LOSSES
        }
        if functional:
            return _loss_call(self.index, functional.pop(), call, call, None)
        if names & {"torch.sum", "torch.mean"}:
            if not call.args:
                return _ELEMENTS
            inner = self.fact(call.args[0].value, at, depth + 1)
            how = "sum" if "torch.sum" in names else "mean"
            return _reduced(inner, how, call.args[1:], call)
        if "builtins.sum" in names and len(call.args) == 1:
            return self._builtin_sum(call.args[0].value, at, depth)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("sum", "mean", "nansum", "nanmean"):
                inner = self.fact(func.value, at, depth + 1)
                how = "sum" if "sum" in method else "mean"
                return _reduced(inner, how, call.args, call)
            if method in _SAME_VALUE:
                return self.fact(func.value, at, depth + 1)
            if method in ("clamp", "clamp_min"):
                return self.fact(func.value, at, depth + 1)
            receiver = self.fact(func.value, at, depth + 1)
            if receiver.reduced:
                return _nonlinear(receiver, f"`.{method}(...)`")
        module = self._loss_module(func)
        if module is not None:
            name = attr_chain(module.func) or ""
            return _loss_call(
                self.index, name.rsplit(".", 1)[-1], call, module, func
            )
        target = self.index.callee(call)
        if target is not None and not self.index.local_class(func):
            return self._returned(target[0], depth)
        inputs = [self.fact(a.value, at, depth + 1) for a in call.args]
        reduced = [f for f in inputs if f.reduced]
        if reduced:
            return _nonlinear(reduced[0], f"`{_code(func)}(...)`")
        return _ELEMENTS

    def _builtin_sum(
        self, iterable: cst.BaseExpression, at: cst.CSTNode, depth: int
    ) -> Fact:
        if isinstance(iterable, (cst.GeneratorExp, cst.ListComp)):
            loop = iterable.for_in
            if m.matches(
                loop.iter,
                m.Call(
                    func=m.Attribute(
                        attr=m.Name("parameters") | m.Name("named_parameters")
                    )
                ),
            ):
                return _CONSTANT  # a regulariser of the weights: no batch in it
            return self.fact(iterable.elt, at, depth + 1)
        if isinstance(iterable, (cst.List, cst.Tuple)):
            facts = [self.fact(e.value, at, depth + 1) for e in iterable.elements]
            result = facts[0] if facts else _CONSTANT
            for fact in facts[1:]:
                result = _added(result, fact)
            return result
        inner = self.fact(iterable, at, depth + 1)
        return Fact("sum") if inner.kind == "elements" else inner

    def _returned(self, function: cst.FunctionDef, depth: int) -> Fact:
        returns = [
            r.value  # type: ignore[attr-defined]
            for r in m.findall(function.body, m.Return())
            if r.value is not None  # type: ignore[attr-defined]
            and not m.matches(r.value, m.Name("None"))  # type: ignore[attr-defined]
        ]
        facts = [self.fact(r, r, depth + 1) for r in returns]
        chosen = _agree(facts)
        if chosen is None:
            return Fact(
                "unknown",
                f"`{function.name.value}` returns losses of different reductions",
            )
        if chosen.kind == "token-mean":
            # Its count is written in terms of the function's own variables.
            return replace(
                chosen,
                count=None,
                reason=f"the loss is a mean over {chosen.what}, computed inside "
                f"`{function.name.value}`: its count of them is not known where "
                "the loss is backpropagated",
            )
        return chosen

    def _loss_module(self, func: cst.BaseExpression) -> cst.Call | None:
        """``criterion`` in ``criterion(out, y)`` where every assignment of it is a
        ``torch.nn`` loss module (``nn.CrossEntropyLoss(...).to(device)`` too)."""
        key = self.index.key(func)
        if key is None:
            return None
        values = self.index.values.get(key, ())
        modules = []
        for value in values:
            while (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in ("to", "cuda", "cpu", "float", "double")
            ):
                value = value.func.value
            if not isinstance(value, cst.Call) or not any(
                q.startswith("torch.nn.") and q.endswith("Loss")
                for q in self.index.qualnames(value.func)
            ):
                return None
            modules.append(value)
        if len(modules) != 1:
            return None
        return modules[0]


def _loss_call(
    index: ModuleIndex,
    name: str,
    call: cst.Call,
    settings: cst.Call,
    criterion: cst.BaseExpression | None,
) -> Fact:
    """The fact of a loss call; ``settings`` holds its keywords (the call itself,
    or the ``nn.*Loss(...)`` that built the criterion)."""
    keywords = {a.keyword.value: a.value for a in settings.args if a.keyword}
    spelled = _code(criterion) if criterion is not None else f"F.{name}"
    if "reduction" in keywords:
        reduction = string_value(keywords["reduction"])
        if reduction is None:
            return Fact(
                "unknown",
                f"`{spelled}` has reduction=`{_code(keywords['reduction'])}`, which is "
                "not written in the file",
            )
    elif m.matches(keywords.get("reduce"), m.Name("False")):
        reduction = "none"
    elif m.matches(keywords.get("size_average"), m.Name("False")):
        reduction = "sum"
    else:
        reduction = "mean"
    if reduction == "none":
        return _ELEMENTS
    if reduction == "sum":
        return Fact("sum")
    if reduction not in ("mean", "batchmean"):
        return Fact("unknown", f"`{spelled}` has reduction={reduction!r}")
    if name not in _IGNORING:
        return Fact("mean")
    if "weight" in keywords and not m.matches(keywords["weight"], m.Name("None")):
        return Fact(
            "unknown",
            f"`{spelled}` has class weights: its mean divides by the weights of "
            "this process's targets, not of the global batch's",
        )
    ignore = keywords.get("ignore_index")
    if ignore is None:
        return Fact("mean")
    targets = [a.value for a in call.args if a.keyword is None][1:2] + [
        a.value for a in call.args if a.keyword and a.keyword.value == "target"
    ]
    what = f"the targets that are not `ignore_index` ({_code(ignore)}) of `{spelled}`"
    if (
        len(targets) != 1
        or not _pure(targets[0])
        or not _pure(ignore)
        or not _bound_once(index, ignore)
    ):
        return Fact("token-mean", what=what)
    target = targets[0]
    if not isinstance(target, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        target = target.with_changes(
            lpar=[cst.LeftParen()], rpar=[cst.RightParen()]
        )
    count = cst.Call(
        func=cst.Attribute(
            value=cst.Comparison(
                left=target,
                comparisons=[
                    cst.ComparisonTarget(operator=cst.NotEqual(), comparator=ignore)
                ],
                lpar=[cst.LeftParen()],
                rpar=[cst.RightParen()],
            ),
            attr=cst.Name("sum"),
        )
    )
    # The names of the target are read at the call, those of ignore_index where
    # the criterion was built (usually a module-level constant).
    return Fact("token-mean", count=count, anchor=call, what=what)


def _reduced(
    inner: Fact, how: str, args: Iterable[cst.Arg], call: cst.Call
) -> Fact:
    """``x.sum(...)`` / ``x.mean(...)`` of a value with fact ``inner``."""
    dims = [a.value for a in args if a.keyword is None or a.keyword.value == "dim"]
    if dims:
        dim = dims[0]
        values = (
            [e.value for e in dim.elements]
            if isinstance(dim, (cst.Tuple, cst.List))
            else [dim]
        )
        if not all(isinstance(v, cst.Integer) or _negative(v) for v in values):
            if inner.reduced:
                return inner
            return Fact(
                "unknown",
                f"`{_code(call)}` reduces over dimensions the analysis cannot read",
            )
        over_batch = any(isinstance(v, cst.Integer) and v.value == "0" for v in values)
        if not over_batch:
            return inner if inner.reduced or inner.kind == "unknown" else _ELEMENTS
    if inner.kind in ("elements",):
        return Fact(how)  # type: ignore[arg-type]
    return inner


def _negative(node: cst.BaseExpression) -> bool:
    return (
        isinstance(node, cst.UnaryOperation)
        and isinstance(node.operator, cst.Minus)
        and isinstance(node.expression, cst.Integer)
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
        return left
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
    return _ELEMENTS


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


def _counts_samples(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """``x.size(0)``, ``len(x)``, ``x.shape[0]``, ``x.numel()``, also through a
    variable set to one (a sum is not a count of samples here)."""
    if m.matches(
        expr, m.Call(func=m.Attribute(attr=m.Name("size")), args=[m.Arg(m.Integer("0"))])
    ) or m.matches(expr, m.Call(func=m.Attribute(attr=m.Name("numel")), args=[])):
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
    return bool(values) and all(
        v is not None and _counts_samples(index, v, depth + 1) for v in values
    )


def _bound_once(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """Is every name ``expr`` reads (``PAD_IDX``, ``tokenizer.pad_token_id``)
    assigned once in the file? It then means the same where the criterion was
    built and where the loss is backpropagated."""
    for name in variable_names(expr):
        spelled = name.value
        bindings = sum(
            len(values) for key, values in index.values.items() if key[1] == spelled
        )
        if bindings != 1:
            return False
    return True


def _pure(expr: cst.BaseExpression) -> bool:
    """Can ``expr`` be evaluated again with the same result (no calls with effects)?"""
    for call in m.findall(expr, m.Call()):
        func = call.func  # type: ignore[attr-defined]
        if not (isinstance(func, cst.Attribute) and func.attr.value in _PURE):
            return False
    return not m.findall(expr, m.NamedExpr() | m.Lambda() | m.Await() | m.Yield())


_BINDINGS = (
    m.AssignTarget()
    | m.AugAssign()
    | m.AnnAssign()
    | m.For()
    | m.CompFor()
    | m.WithItem()
    | m.NamedExpr()
    | m.Del()
)


def _placement_blocker(
    index: ModuleIndex, count: cst.BaseExpression, anchor: cst.CSTNode, at: cst.CSTNode
) -> str | None:
    """Why ``count`` (read where ``anchor`` is evaluated) cannot be written at
    ``at``, or None. It can when ``at`` runs after the anchor's statement in the
    same block, and nothing in between binds or changes a name the count reads."""
    if not _pure(count):
        return "it calls functions"
    statement = _statement(index, anchor)
    block = index.parent(statement) if statement is not None else None
    if block is None or not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return "it is computed in an expression the rule does not follow"
    body = list(block.body)
    start = next((i for i, s in enumerate(body) if s is statement), None)
    end = next(
        (
            i
            for i, s in enumerate(body)
            if s is at or any(a is s for a in index.ancestors(at))
        ),
        None,
    )
    if start is None or end is None or end < start:
        return "the loss is not computed before it in the same block"
    names = {n.value for n in variable_names(count)} - {"True", "False", "None"}
    for between in body[start : end + 1]:
        for node in m.findall(between, _BINDINGS):
            bound = {
                n.value  # type: ignore[attr-defined]
                for target in _bound_targets(node)
                for n in m.findall(target, m.Name())
            }
            if bound & names:
                return f"`{sorted(bound & names)[0]}` is assigned in between"
        for call in m.findall(between, m.Call(func=m.Attribute())):
            func = call.func  # type: ignore[attr-defined]
            if func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                if {n.value for n in m.findall(func.value, m.Name())} & names:
                    return f"`{_code(func.value)}` is changed in place in between"
        for target in m.findall(between, m.AssignTarget(target=m.Subscript())):
            root = target.target.value  # type: ignore[attr-defined]
            if {n.value for n in m.findall(root, m.Name())} & names:
                return f"`{_code(root)}` is changed in place in between"
    return None


def _bound_targets(node: cst.CSTNode) -> list[cst.CSTNode]:
    if isinstance(node, cst.AssignTarget):
        target = node.target
        # `x[i] = ...`, `x.a = ...` do not rebind `x` (changes are checked apart)
        return [target] if not isinstance(target, (cst.Subscript, cst.Attribute)) else []
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return [node.target] if isinstance(node.target, cst.Name) else []
    if isinstance(node, (cst.For, cst.CompFor)):
        return [node.target]
    if isinstance(node, cst.WithItem):
        return [node.asname.name] if node.asname is not None else []
    if isinstance(node, cst.NamedExpr):
        return [node.target]
    if isinstance(node, cst.Del):
        return [node.target]
    return []


def _statement(index: ModuleIndex, node: cst.CSTNode) -> cst.CSTNode | None:
    """The statement of a block that ``node`` is in."""
    current: cst.CSTNode | None = node
    while current is not None:
        parent = index.parent(current)
        if isinstance(parent, (cst.IndentedBlock, cst.Module)):
            return current
        current = parent
    return None
