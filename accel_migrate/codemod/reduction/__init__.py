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
  the view cannot read makes the reduction unknown, not a mean; so does an
  item unpacked from the tuple it returns (``loss, parts = compute_loss(...)``)
  where no loss of a known reduction sits at that position (``helper_items``,
  ``HelperFact.tuple_loss``). So does a
  method of a model class of another module (``model.loss_function(...)``,
  ``HelperFact.method_losses``) whose loss the view cannot place, or to which
  the call hands a weight read off the batch's row count (``row_weights``).
  So does a name that may hold a local module's function whose return the
  view does not read as a mean, through this file's assignments and
  calls (DeepAR's ``loss_fn = net.loss_fn`` passed to ``train(..., loss_fn)``:
  ``traced_criteria.traced_helper_function``). So does a criterion that may be
  an instance of a local module's class whose ``forward`` passes a mean loss
  over the batch through a non-linear function (arcface-pytorch's
  ``FocalLoss``: ``torch.exp(-self.ce(input, target))``,
  ``HelperFact.nonlinear_loss``, ``traced_criteria.traced_nonlinear_criterion``). A call of an
  instance of a local module's loss class (the FNO's ``myloss =
  LpLoss(size_average=False)`` of ``utilities3.py``, a plain class with
  ``__call__``, or an ``nn.Module``) has the reduction its ``forward`` or
  ``__call__`` returns (``HelperFact.call_reduction``, ``called_criteria``): a
  full ``torch.sum`` a sum, a full mean a mean, one chosen by a setting of the
  instance unknown.

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
with no key added later) is the sum of its values' terms. The builtin ``sum``
of a list of losses (``losses.append(...)``, ``+=``, ``.extend``, a display or
a comprehension; ``torch.stack(losses).sum()`` and ``.mean()`` too) adds its
terms (``loss_lists``), a term added in a loop once per iteration: a mean
where every term is a mean and every such loop walks a fixed number of items
(``range(3)``, a display, a model's ``nn.ModuleList``; ``loop_walks``), a sum
where every term is a sum or one per sample of a loop over the batch's samples
(``zip(out, targets)``, ``range(x.size(0))``), unknown otherwise; ``sum(x)`` of what is proven neither a list nor a tensor of the
batch's samples is unknown, never a sum over the batch.
Where nothing says otherwise a loss is a
mean over samples, the default of every ``torch.nn`` loss.

The analysis (``_Reducer``) reads variables and leaves here, operators in
``reducer_operators`` and calls in ``reducer_calls``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from ..analysis import variable_names
from ..patterns import string_value
from ..subtrees import findall
from .facts import (
    _CONSTANT,
    _ELEMENTS,
    Fact,
    Kind,
    _added,
    _agree,
    _constructed,
    _same_region,
    code,
)
from .forward import forward_loss_fact, indexed_output_fact
from .loss_dicts import returned_dict_item
from .loss_inputs import selected_rows
from .placement import BINDINGS, bound_targets, placement_blocker, statement_of
from .read_outs import read_out
from .reducer_calls import _Calls
from .reducer_operators import _Operators

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
    #: for the batch's largest or smallest value (``dist.max()``): the
    #: ``accel.reduce`` op that combines it across processes
    op: str = ""


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


class _Reducer(_Operators, _Calls):
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
        if isinstance(expr, cst.Subscript) and selected_rows(self.index, expr):
            # `loss[y != 0]`: the rows a mask selects, a number of its own on
            # each process (a mean of them is none of the share's samples)
            return Fact("elements", selected=code(expr))
        if isinstance(expr, cst.Subscript):
            # `loss = outputs[0]` of `outputs = model(...)`
            return indexed_output_fact(self.index, expr) or _ELEMENTS
        return _ELEMENTS

    def _variable(
        self, expr: cst.Name | cst.Attribute, at: cst.CSTNode, depth: int
    ) -> Fact:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return self.fact(expr.value, at, depth)
        if (
            isinstance(expr, cst.Attribute)
            and expr.attr.value == "values"
            and isinstance(expr.value, cst.Call)
        ):
            # `x.max(0).values`: as the call (over the batch, a statistic of it)
            return self.fact(expr.value, at, depth + 1)
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
        # `loss = loss.detach().cpu().numpy()` after the backward (powerful-gnns'
        # train()): the same loss read out, not another reduction of it.
        values = [v for v in values if not read_out(self.index, v, key)] or values
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
            return Fact("unknown", _disagreeing(expr, values, facts))
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


def _disagreeing(
    expr: cst.BaseExpression, values: list[cst.BaseExpression], facts: list[Fact]
) -> str:
    """Why a variable assigned values whose facts disagree has no reduction:
    losses of different reductions, or (none of them a loss) values the
    analysis cannot tell are plain numbers (``lambda_mse = args.lambda_mse``,
    later ``lambda_mse = 1``: a weight read off the command line)."""
    if any(f.reduced for f in facts):
        return f"`{code(expr)}` is assigned losses of different reductions"
    shown = [f"`{code(v)}`" for v in values[:3]]
    listed = ", ".join(shown[:-1]) + f" and {shown[-1]}" if len(shown) > 1 else shown[0]
    return (
        f"`{code(expr)}` is assigned {listed}, which the analysis cannot tell are "
        "plain numbers: a tensor of the batch's samples there would change how "
        "the loss reduces"
    )
