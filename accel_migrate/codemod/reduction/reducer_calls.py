"""The reduction of a loss's calls (``F.*`` losses, ``torch.sum``/``.mean()``,
criteria, ``sum(...)``, the returns of this file's and local modules'
functions, models' forwards): the part of the loss reduction analysis
(``reduction._Reducer``) that reads calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..names import FUNCTIONAL_LOSSES
from ..subtrees import findall
from .batch_criteria import batch_handed_criterion
from .called_criteria import called_criterion_fact
from .dims import _EXTREMES, _reduced, _statistic, extreme
from .facts import (
    _CONSTANT,
    _ELEMENTS,
    _NONLINEAR,
    _SAME_VALUE,
    _STATISTICS,
    Fact,
    _agree,
    _loss_call,
    _nonlinear,
    code,
)
from .forward import (
    imported_method_fact,
    model_call_fact,
    model_method,
)
from .handed_callables import handed_callable
from .handed_criteria import handed_criterion
from .helper_items import imported_item_fact
from .local_criteria import criterion_fact
from .loss_dicts import computed_in_call, dict_values_fact, dict_view, model_loss_dict
from .loss_inputs import arithmetic, ranked_operand
from .loss_lists import dict_terms, list_terms, terms_fact
from .operands import elementwise_of_two, over_parameters
from .row_weights import method_row_weight
from .summed_args import unproven_sum
from .traced_criteria import (
    traced_class_weights,
    traced_helper_function,
    traced_loss_modules,
    traced_nonlinear_criterion,
    traced_summing_callable,
)

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex


class _Calls:
    """``_Reducer``'s calls (a base of it: ``fact`` is its)."""

    index: ModuleIndex

    def _call(self, call: cst.Call, at: cst.CSTNode, depth: int) -> Fact:
        func = call.func
        names = self.index.qualnames(func)
        functional = {
            n.rsplit(".", 1)[1]
            for n in names
            if n.startswith("torch.nn.functional.")
            and n.rsplit(".", 1)[1] in FUNCTIONAL_LOSSES
        }
        if functional:
            return _loss_call(self.index, functional.pop(), call, call, None)
        if over_parameters(names, call):
            return _CONSTANT  # `torch.cat([p.view(-1) for p in model.parameters()])`
        if "torch.masked_select" in names or (
            isinstance(func, cst.Attribute) and func.attr.value == "masked_select"
        ):
            # `torch.masked_select(loss, y > 0)`: the elements a mask selects, a
            # number of its own on each process
            return Fact("elements", selected=code(call))
        if names & {"torch.sum", "torch.mean"}:
            if not call.args:
                return _ELEMENTS
            how = "sum" if "torch.sum" in names else "mean"
            stacked = self._stacked(call.args[0].value, call.args[1:], how, depth)
            if stacked is not None:
                return stacked
            inner = self.fact(call.args[0].value, at, depth + 1)
            inner = self._rank_unproven(inner, call.args[0].value, call.args[1:])
            how = "sum" if "torch.sum" in names else "mean"
            return _reduced(inner, how, call.args[1:], call)
        if any(
            n.rsplit(".", 1)[-1] in _STATISTICS for n in names if n.startswith("torch.")
        ):
            return _statistic(call, call.args[1:])
        if (
            any(
                n.rsplit(".", 1)[-1] in _EXTREMES
                for n in names
                if n.startswith("torch.")
            )
            and (found := extreme(call, call.args[1:])) is not None
        ):
            return found
        if any(
            n.rsplit(".", 1)[-1] in _NONLINEAR for n in names if n.startswith("torch.")
        ) or elementwise_of_two(names, call):
            inputs = [self.fact(a.value, at, depth + 1) for a in call.args]
            reduced = [f for f in inputs if f.reduced]
            if reduced:
                return _nonlinear(reduced[0], f"`{code(func)}(...)`")
            if inputs and all(f.kind == "constant" for f in inputs):
                return _CONSTANT
            return _ELEMENTS
        if "builtins.sum" in names and len(call.args) == 1:
            return self._builtin_sum(call.args[0].value, at, depth)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("sum", "mean", "nansum", "nanmean"):
                how = "sum" if "sum" in method else "mean"
                stacked = self._stacked(func.value, call.args, how, depth)
                if stacked is not None:
                    return stacked
                inner = self.fact(func.value, at, depth + 1)
                inner = self._rank_unproven(inner, func.value, call.args)
                how = "sum" if "sum" in method else "mean"
                return _reduced(inner, how, call.args, call)
            if method in _SAME_VALUE:
                return self.fact(func.value, at, depth + 1)
            if method in _STATISTICS:
                return _statistic(call, call.args)
            if method in _EXTREMES and (found := extreme(call, call.args)) is not None:
                return found
            if method in _NONLINEAR:
                receiver = self.fact(func.value, at, depth + 1)
                if receiver.reduced:
                    return _nonlinear(receiver, f"`.{method}(...)`")
                if receiver.kind == "constant":
                    return receiver  # `.pow(2)` of the weights
                return _ELEMENTS
        module = self._loss_module(func)
        if module is not None:
            name = attr_chain(module.func) or ""
            return _loss_call(self.index, name.rsplit(".", 1)[-1], call, module, func)
        if (traced := traced_loss_modules(self.index, call, func)) is not None:
            return traced  # a torch.nn module handed in: as if built beside
        if (batch := batch_handed_criterion(self.index, call, func)) is not None:
            return batch  # a loss module the batch's other files hand in
        weighted = traced_class_weights(self.index, func)
        if weighted:
            # `criterion(out, y)` of a criterion handed in or built in branches,
            # one of which is a class-weighted mean (LDAM-DRW's DRW)
            return Fact("unknown", weighted)
        traced = traced_helper_function(self.index, func)
        if traced:
            # `loss_fn(mu, sigma, y)` of `loss_fn` handed a local module's
            # function whose return the project view cannot read
            return Fact("unknown", traced)
        nonlinear = traced_nonlinear_criterion(self.index, func)
        if nonlinear:
            # `criterion(out, y)` of an instance of a local module's class that
            # passes its batch mean through a non-linear term (a focal loss)
            return Fact("unknown", nonlinear)
        called = called_criterion_fact(self.index, func)
        if called is not None:
            # `myloss(out, y)` of `myloss = LpLoss(size_average=False)`, a loss
            # class of a local module: what its call returns (the project view)
            return called
        local = criterion_fact(self.index, func, lambda e: self.fact(e, e, depth + 1))
        if local is not None:
            # `criterion(out, y)` of a criterion class of this file: its forward's
            return local  # reduction (`loss.sum()` is a sum)
        helper = self.index.helper(func, "loss")
        if helper is not None:
            # A loss built in a local module (the project view): its reduction.
            if helper.reduction in ("mean", "sum"):
                unbound = unproven_sum(self.index, helper, call)
                if unbound:
                    return Fact("unknown", unbound)
                # (``what`` of a sum: where it was learnt, for the finding)
                return Fact(helper.reduction, what=helper.describe())  # type: ignore[arg-type]
            if helper.reduction == "none":
                # a per-sample loss (`reduction="none"`): its `.mean()` here is
                # a mean of the share, as a mean criterion's; alone, not reduced
                # (1-D or more: a reduction over a dimension counted from the
                # end may be the batch's)
                return Fact(
                    "elements",
                    reason=_per_sample(helper.describe()),
                    unranked=code(call),
                )
            return Fact(
                "unknown",
                f"{helper.describe()}, whose count of terms cannot be written here",
            )
        unread = self.index.helper(func)
        if unread is not None and unread.kind == "function" and not unread.returns:
            # A loss returned by a local module's function whose return the
            # project view cannot read (a sum term it cannot place): neither a
            # mean nor a sum can be assumed.
            return Fact(
                "unknown",
                f"the loss is returned by {unread.where}, whose reduction over the "
                "batch (a mean or a sum over its samples) the analysis cannot read "
                "from its return",
            )
        target = self.index.callee(call)
        if target is not None and not self.index.local_class(func):
            return self._returned(target[0], depth)
        method = model_method(self.index, call)
        if method is not None:
            return self._returned(method, depth)
        weighed = method_row_weight(self.index, call)
        if weighed:
            # a method of a model class of another module, handed a weight
            # read off the batch's row count (project_method_weights)
            return Fact("unknown", weighed)
        imported = imported_method_fact(self.index, call)
        if imported is not None:
            # a method of a model class of another module that returns a loss
            return imported
        handed = handed_criterion(self.index, func)
        if handed:
            # `self.criterion = SegmentationLosses(...).build_loss(mode)`: a
            # callable a local module's code hands back, not readable here
            return Fact("unknown", handed)
        summing = traced_summing_callable(self.index, func)
        if summing:
            # a lambda, a partial or a picked module that sums, which no
            # reading above follows
            return Fact("unknown", summing)
        inputs = [self.fact(a.value, at, depth + 1) for a in call.args]
        if (
            isinstance(func, cst.Attribute)
            and all(f.kind == "constant" for f in inputs)
            and self.fact(func.value, at, depth + 1).kind == "constant"
        ):
            return _CONSTANT  # `.norm()` of the weights: no batch in it
        reduced = [f for f in inputs if f.reduced or f.kind == "unknown"]
        if (
            len(call.args) == 1
            and inputs[0].reason
            and m.matches(func, m.Attribute(attr=m.Name("scale")))
        ):
            return inputs[0]  # `scaler.scale(loss)` of a model's own loss
        if len(reduced) == 1 and len(call.args) == 1:
            # `scaler.scale(loss)`: a call the analysis does not know, of the loss
            # alone, is taken to keep what it is (a scale, a cast).
            return reduced[0]
        if reduced:
            return Fact(
                "unknown",
                f"the loss goes through `{code(func)}(...)`, which the analysis does not know",
            )
        # `loss = model(x, y)`: a forward that returns the loss alone
        found = model_call_fact(self.index, call)
        if found is None:
            # A module of this file that AM004 prepared (a criterion with
            # buffers moved to the device, `CBLoss(counts).to(device)`) whose
            # forward returns what the project view cannot read
            # (`(w * ce).sum() / w.sum()`): its returns, read here.
            found = criterion_fact(
                self.index, func, lambda e: self.fact(e, e, depth + 1), prepared=True
            )
        return found or _ELEMENTS

    def _rank_unproven(
        self, inner: Fact, receiver: cst.BaseExpression, args: Sequence[cst.Arg]
    ) -> Fact:
        """``((out - y) ** 2).sum(-1)``: elementwise arithmetic reduced over its
        last dimension is per sample only where it has two dimensions or more,
        which the analysis proves from an operand (``ranked_operand``); of a
        1-D ``out`` it sums the batch itself. Else ``inner`` marked unranked,
        as a per-sample loss of ``reduction="none"`` is (``dims._reduced``)."""
        if inner.kind != "elements" or inner.unranked or inner.reason:
            return inner
        dims = [a.value for a in args if a.keyword is None or a.keyword.value == "dim"]
        if not dims or not m.matches(
            dims[0], m.UnaryOperation(operator=m.Minus(), expression=m.Integer("1"))
        ):
            return inner
        if not arithmetic(self.index, receiver) or ranked_operand(self.index, receiver):
            return inner
        return replace(inner, unranked=code(receiver))

    def _builtin_sum(
        self, iterable: cst.BaseExpression, at: cst.CSTNode, depth: int
    ) -> Fact:
        losses = model_loss_dict(self.index, iterable)
        if losses is not None:
            return computed_in_call(losses)
        if isinstance(iterable, (cst.GeneratorExp, cst.ListComp)) and m.matches(
            iterable.for_in.iter,
            m.Call(
                func=m.Attribute(attr=m.Name("parameters") | m.Name("named_parameters"))
            ),
        ):
            return _CONSTANT  # a regulariser of the weights: no batch in it
        if (
            isinstance(iterable, (cst.GeneratorExp, cst.ListComp))
            and iterable.for_in.inner_for_in is None
            and iterable.for_in.ifs == []
            and isinstance(iterable.for_in.target, cst.Name)
            and m.matches(iterable.elt, m.Name(iterable.for_in.target.value))
        ):
            # `sum(loss for loss in loss_dict.values())`: as `sum` of the iterable
            return self._builtin_sum(iterable.for_in.iter, at, depth + 1)
        found = list_terms(self.index, iterable)
        if found is not None:
            # `losses.append(F.mse_loss(out, y))` ... `sum(losses)`: a sum of
            # those terms (before, a sum over the batch's samples:
            # `reduction="sum"` for a sum of means)
            return terms_fact(found, self.fact, depth, "sum")
        if dict_view(iterable):
            # The values of a dict are losses, not the batch's samples: `sum` adds
            # terms whose reductions are those of the dict's values.
            grown = dict_terms(self.index, iterable.func.value)  # type: ignore[attr-defined]
            if grown is not None and m.matches(iterable.func.attr, m.Name("values")):  # type: ignore[attr-defined]
                # `losses["mse"] = ...` stored: read as a grown list's terms
                return terms_fact(grown, self.fact, depth, "sum")
            return dict_values_fact(self.index, self.fact, iterable, depth)
        inner = self.fact(iterable, at, depth + 1)
        if inner.kind != "elements":
            return inner
        if (
            inner.reason
            or inner.unranked
            or inner.selected
            or _torch_call(self.index, iterable)
        ):
            return Fact("sum")  # a tensor of the batch's samples: a sum over them
        return Fact(
            "unknown",
            f"the loss is `sum({code(iterable)})`, which the analysis cannot tell "
            "is a tensor of the batch's samples (a sum over them) or a collection "
            "of losses (a sum of its terms)",
        )

    def _stacked(
        self,
        receiver: cst.BaseExpression,
        args: Sequence[cst.Arg],
        how: str,
        depth: int,
    ) -> Fact | None:
        """``torch.stack(losses).sum()`` (``.sum(0)``, ``.mean()``): the sum or
        mean of a collection's terms; None where ``receiver`` is no
        ``torch.stack`` of one argument or the reduction is over another
        dimension."""
        if not (
            isinstance(receiver, cst.Call)
            and "torch.stack" in self.index.qualnames(receiver.func)
            and len(receiver.args) == 1
            and receiver.args[0].keyword is None
        ):
            return None
        dims = [a.value for a in args if a.keyword is None or a.keyword.value == "dim"]
        if len(args) > 1 or len(dims) != len(args):
            return None
        zero = m.Integer("0") | m.UnaryOperation(
            operator=m.Minus(), expression=m.Integer("1")
        )
        if dims and not m.matches(dims[0], zero):
            return None
        listed = receiver.args[0].value
        found = list_terms(self.index, listed)
        if found is None:
            return Fact(
                "unknown",
                f"the loss reduces `{code(receiver)}`, and the analysis cannot read "
                f"the terms of `{code(listed)}`",
            )
        return terms_fact(found, self.fact, depth, how)

    def _unpacked_return(self, key: Key, depth: int) -> Fact | None:
        """The fact of ``key`` where every binding of it unpacks item i of what a
        function of this file returns (``loss, nll, ntokens = criterion(...)``,
        each ``return`` a tuple of as many items): that item's fact. None where
        no binding calls such a function; unknown where one cannot be read."""
        sources = self.index.unpacked.get(key, [])
        if not sources:
            return None
        facts: list[Fact] = []
        for value, position, length in sources:
            target = self.index.callee(value) if isinstance(value, cst.Call) else None
            if target is None and isinstance(value, cst.Call):
                handed = handed_callable(self.index, value)
                if handed is not None:
                    # `loss, loss_node = loss_compute(out, y, batch.ntokens)`
                    facts.append(Fact("unknown", handed))
                    continue
                # `loss, parts = compute_loss(...)` of another local module
                imported = imported_item_fact(
                    self.index, value, position, length, key[1]
                )
                if imported is None:
                    return None
                facts.append(imported)
                continue
            if target is None or self.index.local_class(value.func):  # type: ignore[union-attr]
                return None
            function = target[0]
            returns = [
                r.value  # type: ignore[attr-defined]
                for r in findall(function.body, m.Return())
                if r.value is not None  # type: ignore[attr-defined]
            ]
            items = [
                r.elements[position].value
                for r in returns
                if isinstance(r, cst.Tuple)
                and len(r.elements) == length
                and not any(isinstance(e, cst.StarredElement) for e in r.elements)
            ]
            if not items or len(items) != len(returns):
                return Fact(
                    "unknown",
                    f"`{key[1]}` is item {position} of what `{function.name.value}` "
                    "returns, which the analysis cannot read",
                )
            fact = self._returned_items(function, items, depth)
            facts.append(fact)
        chosen = _agree(facts)
        if chosen is None:
            return Fact(
                "unknown", f"`{key[1]}` is unpacked from losses of different reductions"
            )
        return chosen

    def _returned_items(
        self, function: cst.FunctionDef, items: list[cst.BaseExpression], depth: int
    ) -> Fact:
        facts = [self.fact(item, item, depth + 1) for item in items]
        chosen = _agree(facts)
        if chosen is None:
            if all(f.kind in ("constant", "elements") for f in facts):
                # `sigmoid_rampup` returning `1.0` or `float(np.exp(...))`: no
                # loss, values the analysis cannot place
                return Fact(
                    "unknown",
                    f"`{function.name.value}` returns a constant in one place and, "
                    "in another, a value the analysis cannot tell from one of the "
                    "batch",
                )
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

    def _returned(self, function: cst.FunctionDef, depth: int) -> Fact:
        returns = [
            r.value  # type: ignore[attr-defined]
            for r in findall(function.body, m.Return())
            if r.value is not None  # type: ignore[attr-defined]
            and not m.matches(r.value, m.Name("None"))  # type: ignore[attr-defined]
        ]
        return self._returned_items(function, returns, depth)

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


def _torch_call(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """``torch.cat(...)``, ``F.mse_loss(..., reduction="none")``: a call of torch."""
    return isinstance(expr, cst.Call) and any(
        n.startswith("torch.") for n in index.qualnames(expr.func)
    )


def _per_sample(where: str) -> str:
    return (
        f"the loss is {where}, a per-sample loss (reduction='none') that is not "
        "reduced over the batch here"
    )
