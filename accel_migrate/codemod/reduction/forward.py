"""A loss computed in the ``forward`` of a model class of another file.

``logits, loss = model(x, y)``, with ``model = GPT(config)`` and ``GPT`` a model
class of a local module whose ``forward`` returns ``(logits, loss)``
(``forward_losses``: the project view's ``HelperFact.forward_loss``). The loss's
reduction is the one learnt from that file: a mean over samples or a sum is
weighed as such; a mean over the targets that are not ``ignore_index`` is a
token mean, counted as ``(y != ignore).sum()`` of the argument the call passes
for the forward's targets parameter. Where that argument cannot be told, the
count is not known where the loss is backpropagated: needs-review, with the
file named.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .facts import Fact, not_ignored_count

if TYPE_CHECKING:
    from ..analysis import Key, ModuleIndex
    from ..project_facts import ForwardLoss, HelperFact

#: Calls that hand back the model they are given (the migrated file's own).
_SAME_MODEL = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half"})


def forward_loss_fact(index: ModuleIndex, key: Key) -> Fact | None:
    """The fact of ``key`` when every binding of it unpacks the loss of a local
    model class's forward; None otherwise (the caller's default holds)."""
    sources = index.unpacked.get(key, [])
    if not sources or any(v is not None for v in index.values.get(key, [])):
        return None
    facts: list[Fact] = []
    for value, position, length in sources:
        model = _model_class(index, value)
        loss = model.forward_loss if model is not None else None
        if loss is None or (loss.position, loss.length) != (position, length):
            return None
        facts.append(_fact(model, loss, value))  # type: ignore[arg-type]
    kinds = {f.kind for f in facts}
    if len(kinds) != 1:
        return Fact(
            "unknown", "the loss is unpacked from forwards of different reductions"
        )
    if len(facts) > 1 and facts[0].kind == "token-mean":
        # Each call counts its own targets: which one reaches the backward is not
        # followed here, so no count is written.
        return Fact(
            "token-mean",
            reason=f"the loss is a mean over {facts[0].what}, and `{key[1]}` is "
            f"unpacked from {len(facts)} model calls, each with its own count",
            what=facts[0].what,
        )
    return facts[0]


def _fact(model: HelperFact, loss: ForwardLoss, call: cst.Call) -> Fact:
    where = f"`{model.name}.forward` in {model.file}"
    reduction, what = loss.reduction, loss.what
    if reduction == "mean":
        return Fact("mean")
    if reduction == "sum":
        return Fact("sum", what=f"{where} returns a sum-reduced loss")
    if reduction == "token-mean":
        count = _count(loss, call)
        if count is not None:
            return Fact(
                "token-mean", count=count, anchor=call, what=f"{what} in {where}"
            )
        return Fact(
            "token-mean",
            reason=f"the loss is a mean over {what}, computed inside {where}: its "
            "count of them is not known where the loss is backpropagated, and "
            "it can differ between the processes' shares (targets set to the "
            "ignored value)",
            what=f"{what} in {where}",
        )
    return Fact(
        "unknown", f"the loss is computed inside {where}, with a reduction not known"
    )


def _model_class(index: ModuleIndex, value: cst.BaseExpression) -> HelperFact | None:
    """The local model class whose instance ``value`` calls: ``model(x, y)`` with
    every assignment of ``model`` a construction of it (``GPT(config)``, also
    ``.to(device)`` of one and ``accel.prepare_model(GPT(config))``)."""
    if not isinstance(value, cst.Call):
        return None
    key = index.key(value.func)
    bound = list(index.values.get(key, [])) if key is not None else []
    if not bound or any(v is None for v in bound):
        return None
    found: set[HelperFact] = set()
    for construct in bound:
        while isinstance(construct, cst.Call):
            if (
                isinstance(construct.func, cst.Attribute)
                and construct.func.attr.value in _SAME_MODEL
            ):
                construct = construct.func.value
            elif index.is_runtime_call(construct, "prepare_model") and construct.args:
                construct = construct.args[0].value
            else:
                break
        fact = (
            index.helper(construct.func, "model")
            if isinstance(construct, cst.Call)
            else None
        )
        if fact is None or fact.kind != "class":
            return None
        found.add(fact)
    return found.pop() if len(found) == 1 else None


def _count(loss: ForwardLoss, call: cst.Call) -> cst.BaseExpression | None:
    """``(y != -1).sum()`` for ``model(x, y)``: the count of the targets the
    forward does not ignore, of the argument the call passes for its targets
    parameter; None where that argument cannot be told (``*args``, a value
    that is not a plain name or attribute)."""
    if not loss.target_parameter or any(a.star for a in call.args):
        return None
    keyword = [
        a.value
        for a in call.args
        if a.keyword is not None and a.keyword.value == loss.target_parameter
    ]
    positional = [a.value for a in call.args if a.keyword is None]
    if keyword:
        argument = keyword[0]
    elif 0 <= loss.target_position < len(positional):
        argument = positional[loss.target_position]
    else:
        return None
    if not isinstance(argument, (cst.Name, cst.Attribute)):
        return None
    return not_ignored_count(argument.deep_clone(), cst.parse_expression(loss.ignored))
