"""Is a per-batch value a sum or a batch mean?

A sum (``correct += pred.eq(y).sum().item()``, ``total += y.size(0)``, a loss
with ``reduction="sum"``, a batch mean times the batch size) is combined across
processes with ``accel.reduce``; a batch mean (``criterion(out, y).item()``,
``x.mean()``) with ``accel.global_loss``. Variables are read from their
assignments inside the loop (or the function a value is returned from); a
call of a function of this file counts as what it returns, and so does one of a
local module's metric helper (``HelperFact.batch_kind``); ``logits, loss =
model(x, y)`` as what the model's ``forward`` returns there; a loss function
reached through a parameter as what the callers pass (those of the batch's
other files too: ``CallSite.reduction``).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Literal

import libcst as cst
import libcst.matchers as m

from ..analysis import Key, variable_names
from ..batch_rows import batch_values, counts_batch
from ..names import COUNT_METHODS
from ..patterns import counts_samples, string_value
from ..reduction import loss_reduction
from ..reduction.called_criteria import called_criterion_fact
from ..subtrees import findall
from .filled import zero_filled
from .scaled_losses import scaled_loss

if TYPE_CHECKING:
    from ..analysis import ModuleIndex

Kind = Literal["sum", "mean", "unknown"]

#: Counts per bin of a tensor's entries: sums over the batch's rows.
_HISTOGRAMS = frozenset({"torch.bincount", "torch.histc"})
_MEAN_LOSS_HINTS = ("loss", "cross_entropy", "kl_div")
_SAME_OBJECT = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "train", "eval"}
)


#: Methods that give a tensor's own numbers back (another dtype, device, graph).
_CONVERSIONS = _SAME_OBJECT | {"detach", "clone", "contiguous"}


class BatchKinds:
    """The kinds of the per-batch values of one module."""

    def __init__(self, index: ModuleIndex) -> None:
        self.index = index

    def kind(
        self, value: cst.BaseExpression, context: cst.CSTNode, depth: int = 0
    ) -> Kind:
        """Is the value a sum (counts, sum-reduced losses) or a batch mean?
        Variables are read from their assignments inside ``context`` (the loop, or
        the function a value is returned from)."""
        if depth > 3:
            return "unknown"
        if zero_filled(self.index, value):
            return "unknown"  # a start for what is added (metrics.filled)
        inner = read_of(value)
        if inner is not value and isinstance(inner, cst.BinaryOperation):
            value = inner  # `(2 * inter / (p.sum() + y.sum())).item()`
        if isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, (cst.Add, cst.Subtract)):
                found = self._sum_kind(value, context, depth)
                if found is not None:
                    return found
            if isinstance(value.operator, cst.Divide):
                left = self.kind(value.left, context, depth)
                if counts_batch(self.index, value.right):
                    # `correct.sum().item() / x.size(0)`: a sum over this
                    # process's rows over their count is their mean
                    return "mean" if left == "sum" else "unknown"
                if self._reads_batch(value.right):
                    # `2 * inter / (p.sum() + y.sum())`: a ratio of the batch's
                    # values (Dice, IoU) is neither a sum nor a mean of its rows
                    return "unknown"
                # `/ len(loader)`, `/ steps`: the divisor does not make a mean a sum.
                return left
            if isinstance(value.operator, cst.Multiply):
                if counts_samples(self.index, value.left) or counts_samples(
                    self.index, value.right
                ):
                    if scaled_loss(self.index, value):
                        return "unknown"  # AM007 cannot call the loss a mean
                    return "sum"  # a batch mean times the batch size
                if isinstance(value.right, (cst.Integer, cst.Float)):
                    return self.kind(value.left, context, depth)
                if isinstance(value.left, (cst.Integer, cst.Float)):
                    return self.kind(value.right, context, depth)
                if self._reads_batch(value.left) and self._reads_batch(value.right):
                    return "unknown"  # a product of the batch's values
        if self._per_row_scaled(value):
            # `c.mul(100.0 / x.size(0))`: divided by this process's row count
            # somewhere inside: neither its sum nor (provably) its mean
            return "unknown"
        reduction = _reduction(value)
        if reduction == "sum":
            return "sum"
        read = read_of(value)
        if isinstance(read, cst.Call) and (
            self.mean_loss(read)
            or m.matches(read, m.Call(func=m.Attribute(attr=m.Name("mean")), args=[]))
        ):
            return "mean"  # `criterion(out.view(-1, out.size(-1)), y).item()`
        calls = list(findall(value, m.Call()))
        if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in COUNT_METHODS for c in calls):  # type: ignore[attr-defined]
            return "sum"
        if any(self._histogram(c) for c in calls):  # type: ignore[arg-type]
            # counts per class of the rows: `torch.bincount(y, minlength=k)`
            return "sum"
        if findall(value, m.Subscript(value=m.Attribute(attr=m.Name("shape")))) or any(
            "builtins.len" in self.index.qualnames(c.func) for c in calls  # type: ignore[attr-defined]
        ):
            return "sum"
        if any(self.mean_loss(c) for c in calls):  # type: ignore[arg-type]
            return "mean"
        if any(
            m.matches(c, m.Call(func=m.Attribute(attr=m.Name("mean")), args=[]))
            for c in calls
        ):
            return "mean"  # the mean over this process's batch
        if isinstance(value, cst.Integer):
            return "sum"
        inner = read_of(value)
        if isinstance(inner, cst.Call) and self.index.local_function(inner.func):
            return self._returned_kind(inner, depth)
        if isinstance(inner, cst.Call):
            helper = self.index.helper(inner.func)
            if helper is not None and helper.batch_kind:
                # `count_correct(output, target)` of a local module: a full sum
                # (or mean) of what it is handed (project_batch_kinds); a mean
                # that is a number is weighted as one (metrics.forms)
                return "sum" if helper.batch_kind == "sum" else "mean"
        if isinstance(inner, cst.Call):
            called = called_criterion_fact(self.index, inner.func)
            if called is not None and called.kind in ("sum", "mean"):
                # `myloss(out, y).item()` of `myloss = LpLoss(size_average=False)`,
                # a local loss class whose call sums the batch (as AM007 reads it)
                return called.kind  # type: ignore[return-value]
        if isinstance(inner, cst.Call) and self.index.helper(inner.func, "loss"):
            # a loss of a local module's function (the project view), read as
            # the backward reads it (its summed terms checked at this call)
            found = loss_reduction(self.index, inner, inner).kind
            return found if found in ("sum", "mean") else "unknown"  # type: ignore[return-value]
        # `loss.item()` where `loss = criterion(...)` earlier in the loop.
        keys = [self.index.key(n) for n in variable_names(value)]
        kinds = set()
        for key in keys:
            if key is None:
                continue
            for v in self._reaching(self.index.values.get(key, ()), value, context):
                if v is None:
                    kinds.add(self._unpacked_kind(key, context, depth))
                elif m.matches(v, m.Name("None")):
                    continue  # `loss = None` when no targets are given
                elif self._converted(v, key) or zero_filled(self.index, v):
                    # `loss = loss.float()`, `logits = torch.zeros(...)`: the
                    # other assignments' kind
                    continue
                elif inside(self.index, v, context):
                    kinds.add(self.kind(v, context, depth + 1))
        if kinds == {"sum"} or kinds == {"mean"}:
            return kinds.pop()  # type: ignore[return-value]
        return "unknown"

    def _sum_kind(
        self, value: cst.BinaryOperation, context: cst.CSTNode, depth: int
    ) -> Kind | None:
        """``a + b`` / ``a - b``: the sides' kind where they agree. A constant
        side keeps a mean a mean (``1 - correct / n``, PSMNet's 3-pixel error:
        the weighted mean of ``1 - x`` is ``1 -`` the weighted mean of ``x``)
        but makes a sum no sum (``n + 1`` summed over processes counts the
        ``1`` once per process), so it is "unknown". A sum and a mean are
        "unknown"; where one side is unread (``sum(a != b for ...) +
        abs(len(h) - len(r))``, an edit distance), None: the whole expression
        is read as before (its counts)."""
        sides = (value.left, value.right)
        constants = [s for s in sides if number_literal(s)]
        if len(constants) == 2:
            return "unknown"
        if constants:
            other = value.right if number_literal(value.left) else value.left
            return "mean" if self.kind(other, context, depth) == "mean" else "unknown"
        left = self.kind(value.left, context, depth)
        right = self.kind(value.right, context, depth)
        if left == right and left != "unknown":
            return left
        if {left, right} == {"sum", "mean"}:
            return "unknown"
        return None

    def _converted(self, value: cst.BaseExpression, key: Key) -> bool:
        """``loss = loss.float()`` (``.detach()``, ``.cpu()``...): the variable
        rebound to its own value in another dtype or place, the same numbers."""
        return (
            isinstance(value, cst.Call)
            and not value.args
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in _CONVERSIONS
            and self.index.key(value.func.value) == key
        )

    def _histogram(self, call: cst.Call) -> bool:
        """``torch.bincount(y)``, ``y.bincount()``, ``torch.histc(x)`` (not numpy's,
        whose arrays ``accel.reduce`` does not take)."""
        names = self.index.qualnames(call.func)
        if names & _HISTOGRAMS:
            return True
        return (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "bincount"
            and not any(n.startswith("numpy.") for n in names)
        )

    def _reads_batch(self, expr: cst.BaseExpression) -> bool:
        """Does ``expr`` read a value of this process's batch (a loader loop's
        target, or a value computed from one)?"""
        found = batch_values(self.index)
        return any(
            self.index.key(name) in found  # type: ignore[arg-type]
            for name in findall(expr, m.Name())
        )

    def _per_row_scaled(self, value: cst.BaseExpression) -> bool:
        """Is a part of ``value`` divided by this process's row count (``a /
        x.size(0)``, ``a.div(len(y))``, ``a.mul(100.0 / n)``)?"""
        for node in findall(value, m.BinaryOperation(operator=m.Divide())):
            if counts_batch(self.index, node.right):  # type: ignore[attr-defined]
                return True
        for call in findall(value, m.Call(func=m.Attribute())):
            method = call.func.attr.value  # type: ignore[attr-defined]
            if method in _DIVIDING and any(
                counts_batch(self.index, a.value) for a in call.args  # type: ignore[attr-defined]
            ):
                return True
        return False

    def quotient_mean(self, value: cst.BaseExpression, context: cst.CSTNode) -> bool:
        """``correct.sum().item() / x.size(0)``: a sum over this process's rows
        divided by their count (a mean that is combined as a whole, weighted by
        the rows); also with a constant added or taken away (an error rate ``1 -
        correct / n``: ``quotient_part``)."""
        value = quotient_part(value)
        return (
            isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Divide)
            and counts_batch(self.index, value.right)
            and self.kind(value.left, context) == "sum"
        )

    def _reaching(
        self,
        values: list[cst.BaseExpression | None],
        read: cst.CSTNode,
        context: cst.CSTNode,
    ) -> list[cst.BaseExpression | None]:
        """The values of a variable that can reach ``read`` in ``context``: in a
        function whose body assigns it only in top-level statements (no branch or
        loop around them), the last one before the read's statement; otherwise
        all of them. (``nll = -lprobs.gather(...)`` then ``nll =
        nll.masked_fill(pad, 0).sum()`` returns the sum.)"""
        if not isinstance(context, cst.FunctionDef) or None in values:
            return list(values)
        body = context.body.body
        position = {id(statement): i for i, statement in enumerate(body)}

        def top(node: cst.CSTNode) -> int | None:
            for ancestor in self.index.ancestors(node):
                if isinstance(ancestor, _BRANCHING):
                    return None  # it may not run, or run again
                if id(ancestor) in position:
                    return position[id(ancestor)]
            return None

        at = next(
            (position[id(a)] for a in self.index.ancestors(read) if id(a) in position),
            None,
        )
        inner = [v for v in values if v is not None and inside(self.index, v, context)]
        places = [top(v) for v in inner]  # type: ignore[arg-type]
        if at is None or not inner or None in places:
            return list(values)
        before = [(p, v) for p, v in zip(places, inner, strict=True) if p < at]  # type: ignore[operator]
        if not before:
            return list(values)
        return [max(before, key=lambda pair: pair[0])[1]]

    def _returned_kind(self, call: cst.Call, depth: int) -> Kind:
        """The kind of what a function of this file returns."""
        target = self.index.callee(call)
        if target is None:
            return "unknown"
        function = target[0]
        kinds = {
            self.kind(r.value, function, depth + 1)  # type: ignore[attr-defined]
            for r in findall(function.body, m.Return())
            if r.value is not None and not m.matches(r.value, m.Name("None"))  # type: ignore[attr-defined]
        }
        if kinds == {"sum"} or kinds == {"mean"}:
            return kinds.pop()  # type: ignore[return-value]
        return "unknown"

    def _unpacked_kind(self, key: Key, context: cst.CSTNode, depth: int) -> Kind:
        """``logits, loss = model(x, y)``: the kind of the model's ``forward``
        returns at that position (a model class of this file); ``loss, ntokens =
        criterion(...)``: of what that function of this file returns there."""
        for assign in findall(context, m.Assign()):
            assert isinstance(assign, cst.Assign)
            target = assign.targets[0].target if len(assign.targets) == 1 else None
            if not isinstance(target, (cst.Tuple, cst.List)):
                continue
            positions = [
                i
                for i, e in enumerate(target.elements)
                if isinstance(e.value, cst.Name) and self.index.key(e.value) == key
            ]
            if len(positions) != 1 or not isinstance(assign.value, cst.Call):
                continue
            called = self.index.callee(assign.value)
            if called is not None and self.index.local_function(assign.value.func):
                # `loss, nll, ntokens = criterion(...)`: a function of this file
                forward = called[0]
            else:
                forward = self._forward_of(assign.value.func)
            if forward is None:
                return "unknown"
            kinds = set()
            for returned in findall(forward.body, m.Return()):
                value = returned.value  # type: ignore[attr-defined]
                if not isinstance(value, cst.Tuple) or len(value.elements) != len(
                    target.elements
                ):
                    return "unknown"
                kinds.add(
                    self.kind(value.elements[positions[0]].value, forward, depth + 1)
                )
            if kinds == {"sum"} or kinds == {"mean"}:
                return kinds.pop()  # type: ignore[return-value]
            return "unknown"
        return "unknown"

    def _forward_of(self, model: cst.BaseExpression) -> cst.FunctionDef | None:
        """The ``forward`` of the class of this file that ``model`` holds."""
        key = self.index.key(model)
        classes = set()
        for source in self._sources(key) if key is not None else []:
            core = unwrapped(self.index, source)
            cls = (
                self.index.local_class(core.func)
                if isinstance(core, cst.Call)
                else None
            )
            if cls is None:
                return None
            classes.add(cls)
        if len(classes) != 1:
            return None
        cls = classes.pop()
        for statement in cls.body.body:  # type: ignore[union-attr]
            if (
                isinstance(statement, cst.FunctionDef)
                and statement.name.value == "forward"
            ):
                return statement
        return None

    @cached_property
    def _passed(self) -> dict[Key, list[cst.BaseExpression]]:
        """Parameters of the file's functions -> the arguments their calls pass."""
        passed: dict[Key, list[cst.BaseExpression]] = {}
        for call in self.index.calls:
            for key, value in self.index.arguments(call):
                passed.setdefault(key, []).append(value)
        return passed

    def _sources(self, key: Key, depth: int = 0) -> list[cst.BaseExpression]:
        """What ``key`` may hold: the values assigned to it and, for a parameter,
        the arguments of its calls, through plain aliases (``a = b``)."""
        found: list[cst.BaseExpression] = []
        for value in [*self.index.values.get(key, ()), *self._passed.get(key, ())]:
            if value is None:
                continue
            inner = self.index.key(value) if depth < 3 else None
            if (
                inner is not None
                and inner != key
                and (inner in self.index.values or inner in self._passed)
            ):
                found.extend(self._sources(inner, depth + 1))
            else:
                found.append(value)
        return found

    def mean_loss(self, call: cst.Call) -> bool:
        """A loss call with the default (mean) reduction: ``F.nll_loss(...)``,
        ``criterion(...)`` where ``criterion = nn.CrossEntropyLoss()``, or where
        every caller passes such a loss (``F.cross_entropy`` itself included)."""
        if _reduction(call) is not None:
            return _reduction(call) == "mean"
        if self._mean_loss_function(call.func):
            return True
        key: Key | None = self.index.key(call.func)
        sources = self._sources(key) if key is not None else []
        if not sources and key is not None and self._callers_hand_mean_loss(call, key):
            return True
        # `criterion = criterion.cuda(args.gpu)`: the same module, moved
        cores = [unwrapped(self.index, v) for v in sources]
        kept = [
            (v, core)
            for v, core in zip(sources, cores, strict=True)
            if not (v is not core and self._same_variable(core, sources))
        ]
        return bool(kept) and all(
            self._mean_loss_module(core) or self._mean_loss_function(v)
            for v, core in kept
        )

    def _callers_hand_mean_loss(self, call: cst.Call, key: Key) -> bool:
        """``criterion(output, target)`` with ``criterion`` a parameter of a
        module-level function this file never calls nor assigns, that every call
        from the batch's other files hands a loss module of the mean reduction
        (``criterion = nn.CrossEntropyLoss()`` in main.py: ``project_callers``)."""
        function = self.index.enclosing_function(call)
        func = call.func
        if (
            function is None
            or not isinstance(func, cst.Name)
            or self.index.enclosing_class(function) is not None
            or key != self.index.function_scope_key(function, func.value)
            or self.index.values.get(key)
        ):
            return False
        sites = self.index.project.callers_of(function.name.value)
        return bool(sites) and all(
            s.kind(func.value) == "criterion" and s.reduction(func.value) == "mean"
            for s in sites
        )

    def _same_variable(
        self, core: cst.BaseExpression, sources: list[cst.BaseExpression]
    ) -> bool:
        """Is ``core`` (what a ``.to(d)``/``.cuda()`` was called on) a variable
        whose other values are ``sources`` (a module moved in place)?"""
        key = self.index.key(core)
        if key is None:
            return False
        own = [v for v in self._sources(key) if v is not None]
        return bool(own) and all(any(v is o for o in sources) for v in own)

    def _mean_loss_function(self, func: cst.BaseExpression) -> bool:
        return any(
            name.startswith("torch.nn.functional.")
            and any(h in name for h in _MEAN_LOSS_HINTS)
            for name in self.index.qualnames(func)
        )

    def _mean_loss_module(self, value: cst.BaseExpression) -> bool:
        return (
            isinstance(value, cst.Call)
            and _reduction(value) in (None, "mean")
            and any(
                q.startswith("torch.nn.") and q.endswith("Loss")
                for q in self.index.qualnames(value.func)
            )
        )


#: Tensor methods that divide by their argument.
_DIVIDING = frozenset({"div", "div_", "divide", "true_divide", "true_divide_"})

#: Statements around an assignment that make it not always run once, in order.
_BRANCHING = (
    cst.For,
    cst.While,
    cst.If,
    cst.Try,
    cst.TryStar,
    cst.Match,
    cst.FunctionDef,
    cst.Lambda,
    cst.ClassDef,
    cst.IfExp,
    cst.BooleanOperation,
    cst.CompFor,
)


def quotient_part(value: cst.BaseExpression) -> cst.BaseExpression:
    """The side of ``1 - q`` (``q + 1``...) that is not a constant, else ``value``."""
    if isinstance(value, cst.BinaryOperation) and isinstance(
        value.operator, (cst.Add, cst.Subtract)
    ):
        if number_literal(value.left) and not number_literal(value.right):
            return value.right
        if number_literal(value.right) and not number_literal(value.left):
            return value.left
    return value


def number_literal(value: cst.BaseExpression) -> bool:
    """A number written in the code (``1``, ``-0.5``, ``+2``)."""
    if isinstance(value, cst.UnaryOperation) and isinstance(
        value.operator, (cst.Minus, cst.Plus)
    ):
        return number_literal(value.expression)
    return isinstance(value, (cst.Integer, cst.Float))


def inside(index: ModuleIndex, node: cst.CSTNode, context: cst.CSTNode) -> bool:
    return any(a is context for a in index.ancestors(node))


def _reduction(node: cst.CSTNode) -> str | None:
    for arg in findall(node, m.Arg(keyword=m.Name("reduction"))):
        return string_value(arg.value)  # type: ignore[attr-defined]
    return None


def unwrapped(index: ModuleIndex, expr: cst.BaseExpression) -> cst.BaseExpression:
    """``accel.prepare_model(Net().to(d))`` -> ``Net()``; ``nn.L1Loss().to(d)`` ->
    ``nn.L1Loss()``."""
    while True:
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in _SAME_OBJECT
        ):
            expr = expr.func.value
        elif index.is_runtime_call(expr, "prepare_model") and expr.args:  # type: ignore[attr-defined]
            expr = expr.args[0].value  # type: ignore[attr-defined]
        else:
            return expr


def read_of(value: cst.BaseExpression) -> cst.BaseExpression:
    """``f(x).item()`` and ``float(f(x))`` -> ``f(x)``."""
    if m.matches(value, m.Call(func=m.Attribute(attr=m.Name("item")), args=[])):
        return value.func.value  # type: ignore[attr-defined]
    if m.matches(value, m.Call(func=m.Name("float"), args=[m.Arg(keyword=None)])):
        return value.args[0].value  # type: ignore[attr-defined]
    return value


def returned_tensor(index: ModuleIndex, value: cst.BaseExpression) -> str | None:
    """The function whose returned loss tensor ``value`` is (``loss`` from
    ``loss = self._run_batch(x, y)``, or the call itself), if it is one."""
    returned = index.returned_losses
    if isinstance(value, cst.Call):
        found = returned.returned_by(value)
    else:
        key = index.key(value)
        call = returned.call_of(key) if key is not None else None
        found = returned.returned_by(call) if call is not None else None
    return found.function.name.value if found is not None else None
