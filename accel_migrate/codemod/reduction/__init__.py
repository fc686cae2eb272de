"""How a loss reduces its batch: a mean over samples, a sum, or a mean over tokens.

The runtime weighs each process's loss so that the averaged gradient is the
original's over the global batch; the weight depends on this fact (see
``accel_migrate/runtime/loss_share.py``). A shared analysis, so that every rule
that asks (the backward rewrite, logged losses) gets the same answer:

- a loss function's ``reduction=`` (``F.*`` losses and ``nn.*Loss`` modules,
  also a criterion made once and called later), ``size_average=False``,
  ``reduce=False``; ``ignore_index=`` of a mean makes it a mean over the
  targets that are not ignored (tokens), and so does a masked mean
  ``(l * mask).sum() / mask.sum()``; a mean loss of rows a mask or indices
  select (``F.smooth_l1_loss(box[pos], t[pos])``, ``pos = labels > 0``) has an
  unknown reduction: a mean over a number of rows each share has its own of;
- a mean over packed sequences (``criterion(out.data, packed.data)``, where an
  argument comes from ``pack_padded_sequence``/``pack_sequence``) is a mean over
  their tokens, counted by ``target.numel()``;
- explicit sums and means (``torch.sum(x)``, ``x.sum()``, ``.mean()``; over
  dimension 0 or all of them, not per-sample ones like ``.sum(1)``);
- how terms combine: ``a + b``, times or over a constant, a sum over the
  batch size (``/ len(x)``: a mean), through variables and through the
  returns of this file's functions (``def loss_function(...): return BCE + KLD``),
  also an item of the tuples they return (``loss, ntokens = criterion(...)``,
  fairseq's summed loss and token count; unknown where a return is not a tuple
  the analysis can read);
- a loss unpacked from a model's call (``logits, loss = model(x, y)``), or the
  call itself where the forward returns the loss alone, has the
  reduction its class's ``forward`` computes (``forward``, ``model_classes``:
  the model followed through factories, parameters and ``self.model``); where
  the class cannot be told, the reduction is not known (a value unpacked from
  it is still per-element inside an expression: ``mu.pow(2)``);
- a loss returned by a local module's function (the project view) has the
  reduction read there, a term summed over a parameter only where the call
  hands it a model's output (``summed_args``); a local function whose return
  the view cannot read makes the reduction unknown, not a mean. So does a
  method of a model class of another module (``model.loss_function(...)``,
  ``HelperFact.method_losses``) whose loss the view cannot place, or to which
  the call hands a weight read off the batch's row count (``row_weights``).

Nothing is a mean over tokens without ``ignore_index`` or a mask: a plain
``cross_entropy`` of ``(batch * time, vocab)`` logits averages over samples
of one length. ``cross_entropy``'s default ``ignore_index=-100`` makes a
token mean only in a file that can write -100 into targets (the literal, or a
Hugging Face collator that pads labels with it); the count ``(y != -100).sum()``
is exact either way. A loss the model computes itself (``outputs.loss``,
``outputs["loss"]``) has an unknown reduction: Hugging Face models average over
the label tokens that are not -100. So has the sum of a dict of losses a model
or criterion returned (``sum(loss_dict.values())`` after ``loss_dict =
model(images, targets)``), and of a dict's values the analysis does not read;
``sum(d.values())`` of a dict literal (also one a function of this file returns,
with no key added later) is the sum of its values' terms.
Where nothing says otherwise a loss is a
mean over samples, the default of every ``torch.nn`` loss.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain, variable_names
from ..names import FUNCTIONAL_LOSSES
from ..patterns import string_value
from ..subtrees import findall
from .facts import (
    _CONSTANT,
    _ELEMENTS,
    _NONLINEAR,
    _SAME_VALUE,
    _STATISTICS,
    Fact,
    Kind,
    _added,
    _agree,
    _constructed,
    _counts_samples,
    _loss_call,
    _nonlinear,
    _reduced,
    _same_region,
    _scaled,
    _setting,
    _statistic,
    code,
)
from .forward import (
    forward_loss_fact,
    imported_method_fact,
    indexed_output_fact,
    model_call_fact,
    model_method,
)
from .local_criteria import criterion_fact
from .loss_dicts import (
    computed_in_call,
    dict_values_fact,
    dict_view,
    model_loss_dict,
    returned_dict_item,
)
from .model_classes import called_model
from .operands import centred, elementwise_of_two, over_parameters
from .placement import BINDINGS, bound_targets, placement_blocker, statement_of
from .row_weights import method_row_weight, row_count_weight
from .summed_args import unproven_sum

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex

__all__ = ["Fact", "Kind", "LossReduction", "loss_reduction"]


@dataclass(frozen=True)
class LossReduction:
    """The reduction of a backpropagated loss, for the runtime call at ``at``.

    ``count``: for a token mean, the count expression to pass there, or None
    with ``reason`` saying why none can be written."""

    kind: Kind
    reason: str = ""
    count: cst.BaseExpression | None = None
    what: str = ""  # for a token mean: what it averages over; a sum: its source


def loss_reduction(
    index: ModuleIndex, loss: cst.BaseExpression, at: cst.CSTNode
) -> LossReduction:
    """The reduction of ``loss`` (an expression of the original tree) as seen
    by the call ``at`` that backpropagates or logs it."""
    fact = _Reducer(index).fact(loss, at, 0)
    if fact.kind == "unknown" or (fact.kind == "elements" and fact.reason):
        return LossReduction("unknown", fact.reason)
    if fact.kind == "sum":
        return LossReduction("sum", what=fact.what)
    if fact.kind != "token-mean":
        return LossReduction("mean")
    if fact.count is None or fact.anchor is None:
        return LossReduction(
            "token-mean", fact.reason or _unplaceable(fact), what=fact.what
        )
    blocker = placement_blocker(index, fact.count, fact.anchor, at)
    if blocker is not None:
        return LossReduction(
            "token-mean", f"{_unplaceable(fact)} ({blocker})", what=fact.what
        )
    return LossReduction("token-mean", count=fact.count.deep_clone(), what=fact.what)


def _may_depend_on_model(
    index: ModuleIndex,
    expr: cst.BaseExpression,
    depth: int = 0,
    seen: set[Key] | None = None,
) -> bool:
    """Could ``expr`` depend on a model's output, and so on its parameters? A
    call of a model, followed through variables and the arguments this file's
    calls pass its functions; a parameter no call of the file is seen to pass
    (a loss class's ``forward``, whose inputs may be the predictions) may."""
    if depth > 6:
        return True
    seen = set() if seen is None else seen
    for call in findall(expr, m.Call()):
        if called_model(index, call) is not None:  # type: ignore[arg-type]
            return True
    for name in variable_names(expr):
        key = index.key(name)
        if key is None or name.value == "self" or key in seen:
            continue  # (`src, tgt = src.cuda(), tgt.cuda()` reads itself)
        seen.add(key)
        values = index.values.get(key)
        unpacked = index.unpacked.get(key, [])
        if values is None and not unpacked:
            function = index.enclosing_function(name)
            params = function.params if function is not None else None
            if params is None or not any(
                p.name.value == name.value
                for p in (*params.posonly_params, *params.params, *params.kwonly_params)
            ):
                continue  # bound elsewhere (a loop's target over a loader)
            sites = index.call_sites(function)  # type: ignore[arg-type]
            if not sites:
                return True
            for site in sites:
                for param, arg in index.arguments(site):
                    if param == key and _may_depend_on_model(
                        index, arg, depth + 1, seen
                    ):
                        return True
            continue
        for value in values or ():
            if value is not None and _may_depend_on_model(
                index, value, depth + 1, seen
            ):
                return True
        for value, _, _ in unpacked:
            if _may_depend_on_model(index, value, depth + 1, seen):
                return True
    return False


def _computed_by_model(expr: cst.BaseExpression) -> Fact:
    return Fact(
        "unknown",
        f"`{code(expr)}` is computed inside the model, from labels the analysis "
        "does not see: a Hugging Face model averages it over the label tokens that "
        "are not -100 (shifted by one in a causal LM), a count that differs between "
        "the processes' shares. Pass that count as `count=` where the loss is "
        "backpropagated, unless every sample has the same number of label tokens",
    )


def _unplaceable(fact: Fact) -> str:
    return (
        f"the loss is a mean over {fact.what}, and this process's count of them "
        "cannot be written where it is backpropagated"
    )


class _Reducer:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        #: Variables being evaluated, and what they stand for meanwhile: in
        #: ``loss = loss / steps`` the right side's ``loss`` is the earlier value.
        self._bound: dict[Key, Fact] = {}

    # -- leaves ---------------------------------------------------------------------
    def fact(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> Fact:
        if depth > 12:
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
        item = returned_dict_item(self.index, expr)
        if isinstance(item, Fact):
            return item
        if item is not None:
            # `losses["loss"]` of a function of this file returning a dict
            return self._returned_items(item[0], item[1], depth)
        if isinstance(expr, cst.Subscript) and self._model_loss(expr):
            return _computed_by_model(expr)
        if isinstance(expr, cst.Subscript):
            # `loss = outputs[0]` of `outputs = model(...)`
            return indexed_output_fact(self.index, expr) or _ELEMENTS
        return _ELEMENTS

    def _variable(
        self, expr: cst.Name | cst.Attribute, at: cst.CSTNode, depth: int
    ) -> Fact:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return self.fact(expr.value, at, depth)
        if self._model_loss(expr):
            return _computed_by_model(expr)
        key = self.index.key(expr)
        if key is None:
            return _ELEMENTS
        if key in self._bound:
            return self._bound[key]
        values = [v for v in self.index.values.get(key, ()) if v is not None]
        increments = [
            a
            for a in self.index.augmented.get(key, ())
            if isinstance(a.operator, (cst.AddAssign, cst.SubtractAssign))
        ]
        if not values:
            # `logits, loss = model(x, y)`: a loss of another file's forward;
            # `loss, ntokens = criterion(...)`: an item of this file's function
            found = forward_loss_fact(self.index, key)
            if found is None:
                found = self._unpacked_return(key, depth)
            return found or _ELEMENTS
        if all(_constructed(self.index, v) for v in values) and not increments:
            return _CONSTANT
        own = [v for v in values if self._reads(v, key)]
        values = [v for v in values if not self._reads(v, key)] or values
        self._bound[key] = _ELEMENTS  # a value read in its own definition
        try:
            facts = [self.fact(v, v, depth + 1) for v in values]
            base = _agree(facts)
            if base is not None and own:
                # `loss = loss / steps`: the same loss, transformed.
                self._bound[key] = base
                facts += [self.fact(v, v, depth + 1) for v in own]
                values = values + own
        finally:
            del self._bound[key]
        chosen = _agree(facts)
        reaching = self._reaching(key, at) if chosen is None else None
        if reaching is not None and reaching in values:
            # `loss = ...` twice in one loop body: the one just before the use.
            chosen = facts[values.index(reaching)]
        if chosen is None:
            # Several assignments: those in the loop or function of the use.
            near = [
                f
                for v, f in zip(values, facts, strict=True)
                if _same_region(self.index, v, at)
            ]
            chosen = _agree(near) if near else None
            if chosen is not None and base is None:
                chosen = self._transformed(key, chosen, own, at, depth)
        if chosen is None:
            return Fact(
                "unknown",
                f"`{code(expr)}` is assigned losses of different reductions",
            )
        for increment in increments:
            chosen = _added(chosen, self.fact(increment.value, increment, depth + 1))
        return chosen

    def _transformed(
        self,
        key: Key,
        chosen: Fact,
        own: list[cst.BaseExpression],
        at: cst.CSTNode,
        depth: int,
    ) -> Fact | None:
        """``chosen`` (the fact of the assignments near ``at``), after the
        assignments there that read the variable itself (``loss = loss +
        masked_mean(...)``): None when they do not agree with it. Without this,
        a ``loss = 0`` of another loop left them out."""
        near = [v for v in own if _same_region(self.index, v, at)]
        if not near:
            return chosen
        self._bound[key] = chosen
        try:
            facts = [self.fact(v, v, depth + 1) for v in near]
        finally:
            del self._bound[key]
        agreed = _agree([chosen, *facts])
        if agreed is None:
            # the reason of a transformation the analysis cannot follow
            return next((f for f in facts if f.kind == "unknown" and f.reason), None)
        return agreed

    def _reaching(self, key: Key, at: cst.CSTNode) -> cst.BaseExpression | None:
        """The value of the last ``name = value`` before ``at`` in its block, when
        nothing else binds the name in between."""
        statement = statement_of(self.index, at)
        block = self.index.parent(statement) if statement is not None else None
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return None
        body = list(block.body)
        position = next(i for i, s in enumerate(body) if s is statement)
        for prior in reversed(body[:position]):
            small = prior.body if isinstance(prior, cst.SimpleStatementLine) else ()
            for node in small:
                if (
                    isinstance(node, cst.Assign)
                    and len(node.targets) == 1
                    and self.index.key(node.targets[0].target) == key
                ):
                    return node.value
            for node in findall(prior, BINDINGS):
                if any(
                    self.index.key(n) == key
                    for target in bound_targets(node)
                    for n in findall(target, m.Name())
                ):
                    return None
        return None

    def _model_loss(self, expr: cst.BaseExpression) -> bool:
        """``outputs.loss`` / ``outputs["loss"]`` of a call's result: a loss the
        model computed in its forward, from labels the analysis does not see."""
        if isinstance(expr, cst.Attribute):
            if expr.attr.value != "loss":
                return False
            base = expr.value
        elif isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
            index = expr.slice[0].slice
            if not (
                isinstance(index, cst.Index) and string_value(index.value) == "loss"
            ):
                return False
            base = expr.value
        else:
            return False
        if isinstance(base, cst.Call):
            return True
        key = self.index.key(base) if isinstance(base, cst.Name) else None
        values = self.index.values.get(key, ()) if key is not None else ()
        return bool(values) and all(isinstance(v, cst.Call) for v in values)

    def _reads(self, value: cst.BaseExpression, key: Key) -> bool:
        return any(self.index.key(n) == key for n in variable_names(value))

    # -- operators --------------------------------------------------------------------
    def _binary(self, expr: cst.BinaryOperation, at: cst.CSTNode, depth: int) -> Fact:
        left = self.fact(expr.left, at, depth + 1)
        right = self.fact(expr.right, at, depth + 1)
        op = expr.operator
        if isinstance(op, (cst.Add, cst.Subtract)):
            statistic = centred(expr, left, right)
            if statistic is not None:
                return Fact(
                    "unknown",
                    f"the loss reads `{code(expr)}`, the batch's values shifted by "
                    f"their own {statistic} (a normalisation over the batch, as of "
                    "advantages or features): each process would use its share's "
                    f"{statistic}, not the global batch's",
                )
            return _added(left, right)
        if isinstance(op, cst.Multiply):
            for a, b, b_expr in ((left, right, expr.right), (right, left, expr.left)):
                if a.kind == "constant" and (
                    b.kind == "constant" or _setting(self.index, b_expr)
                ):
                    return _CONSTANT  # `args.weight_decay * l2` of the weights
                if a.kind == "mean" and _counts_samples(self.index, b_expr):
                    return Fact("sum")  # a batch mean times the batch size
                if a.reduced and b.kind in ("constant", "elements"):
                    # A weight of a reduced loss (`0.5 * kld`, `args.alpha * loss`),
                    # unless it reads the batch's row count.
                    why = row_count_weight(self.index, b_expr)
                    return Fact("unknown", why) if why else a
            return _scaled(left, right)
        if isinstance(op, cst.Divide):
            return self._divided(left, right, expr.right)
        if isinstance(op, cst.Power) and left.reduced:
            return _nonlinear(left, f"`{code(expr)}`")
        return _scaled(left, right)

    def _divided(self, left: Fact, right: Fact, divisor: cst.BaseExpression) -> Fact:
        if left.kind == "unknown":
            return left
        if right.kind == "unknown":
            return right  # `adv / (adv.std() + 1e-8)`: whatever the dividend is
        if left.kind == "elements" and right.reduced:
            return Fact(
                "unknown",
                f"the loss divides the batch's values by `{code(divisor)}`, a "
                "reduction of the batch (a normalisation over it): each process "
                "would divide by its share's, not the global batch's",
            )
        if left.kind == "sum":
            if right.kind == "sum" and _may_depend_on_model(self.index, divisor):
                # `2 * (p * t).sum() / (p + t).sum()`: a Dice or IoU term, a
                # ratio of the batch's sums whose divisor moves with the model.
                # Weighting each process by a count is right only for a count
                # that does not (a mask, the targets that are not ignored).
                return Fact(
                    "unknown",
                    f"the loss divides a sum over the batch by `{code(divisor)}`, "
                    "which may depend on the model's output, as a Dice or IoU "
                    "term's does: then it is a ratio of the batch's sums, which no "
                    "weighting of each process's share rebuilds; if it counts "
                    "samples, tokens or weights that do not depend on the model, "
                    "pass this process's count to accel.backward(count=...)",
                )
            if right.kind == "sum":
                # `(l * mask).sum() / mask.sum()`: a mean over what the mask counts.
                anchor = self._anchor(divisor)
                return Fact(
                    "token-mean",
                    count=divisor,
                    anchor=anchor,
                    what=f"the elements `{code(divisor)}` counts",
                )
            if _counts_samples(self.index, divisor):
                return Fact("mean")
            if right.kind == "constant" or _setting(self.index, divisor):
                return left
            return Fact(
                "unknown",
                f"a sum over the batch is divided by `{code(divisor)}`, which the "
                "analysis cannot tell apart as this process's count or a constant",
            )
        if left.kind in ("mean", "token-mean", "constant", "unknown"):
            return left  # `/ accumulation_steps`: a mean stays a mean
        if left.reason and (right.kind == "constant" or _setting(self.index, divisor)):
            return left  # a model's own loss over the accumulation steps
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
            and n.rsplit(".", 1)[1] in FUNCTIONAL_LOSSES
        }
        if functional:
            return _loss_call(self.index, functional.pop(), call, call, None)
        if over_parameters(names, call):
            return _CONSTANT  # `torch.cat([p.view(-1) for p in model.parameters()])`
        if names & {"torch.sum", "torch.mean"}:
            if not call.args:
                return _ELEMENTS
            inner = self.fact(call.args[0].value, at, depth + 1)
            how = "sum" if "torch.sum" in names else "mean"
            return _reduced(inner, how, call.args[1:], call)
        if any(
            n.rsplit(".", 1)[-1] in _STATISTICS for n in names if n.startswith("torch.")
        ):
            return _statistic(call, call.args[1:])
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
                inner = self.fact(func.value, at, depth + 1)
                how = "sum" if "sum" in method else "mean"
                return _reduced(inner, how, call.args, call)
            if method in _SAME_VALUE:
                return self.fact(func.value, at, depth + 1)
            if method in _STATISTICS:
                return _statistic(call, call.args)
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

    def _builtin_sum(
        self, iterable: cst.BaseExpression, at: cst.CSTNode, depth: int
    ) -> Fact:
        losses = model_loss_dict(self.index, iterable)
        if losses is not None:
            return computed_in_call(losses)
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
        if dict_view(iterable):
            # The values of a dict are losses, not the batch's samples: `sum` adds
            # terms whose reductions are those of the dict's values.
            return dict_values_fact(self.index, self.fact, iterable, depth)
        inner = self.fact(iterable, at, depth + 1)
        return Fact("sum") if inner.kind == "elements" else inner

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
