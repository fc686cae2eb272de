"""Models whose class is picked by name from a local module: the torchvision
references' ``model = models.__dict__[args.model]()``, ``getattr(models,
args.arch)(...)``, or ``MODELS[args.model](...)`` over a dict of the file
whose values are classes of a local module.

The rules that read a model's forward (a draw of ``torch.randn``: AM020; a
reduction over the batch into a buffer: AM037; a loss the forward returns...)
find it through the class a call names (``ModuleIndex.helper``). A class
picked at run time is named by no call, so none of them reads it: preparing
such a model would migrate it with no finding whatever its forward does.
``picked_model`` takes the candidate classes (and factories) such a pick may
reach from ``model_lookups.looked_up_models``, and ``unread_reason`` says why
one of them is not shown plain: any fact the project view records about it
beyond being a model (``_PLAIN``) is one some rule would have read had the
class been named. AM004 prepares the model only where every candidate is
plain; otherwise it leaves the setup whole, naming them
(``AllOrNothing._block_picked_models``).

Static only: the analysis's qualified names and the project view's facts.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

import libcst as cst

from .amp import code

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .project_facts import HelperFact

#: The builtin that picks a class by name.
_GETATTR = "builtins.getattr"
#: The facts a plain model class (or a factory of one) may carry: which it
#: is, where, and the batch it is read in. Any other is something a rule reads
#: from a named class (draws, batch mixing, a forward loss, writes...).
_PLAIN = frozenset(
    {
        "name",
        "file",
        "kind",
        "returns",
        "params",
        "model_class",
        "batch_migrated",
        "batch_library",
        # dropout: AM018 reads it of every candidate of a pick
        # (``model_lookups``), and reports it where the pick builds the model
        "stochastic",
        # a loss the forward returns: AM007 and AM008 already say, needs-review,
        # that a picked model's loss reduction is not seen
        # (fixtures/projects/forward_loss_reach)
        "forward_loss",
        "tuple_loss",
        # how calling an instance reduces the batch: read where the instance is
        # a criterion (AM007), which a picked model's call is not
        "call_reduction",
    }
)


def picked_model(
    index: ModuleIndex, call: cst.Call
) -> tuple[str, tuple[HelperFact, ...]] | None:
    """For a call that builds a model picked by name among a local module's
    (``model_lookups.looked_up_models``): how it picks, and the candidates'
    facts (empty where the module is local but no model of it is known, so
    none is shown plain). None for any other call (a library's module: its
    models' forwards are no rule's to read)."""
    from .model_lookups import looked_up_models

    func = call.func
    module: cst.BaseExpression | None = None
    if (
        isinstance(func, cst.Subscript)
        and isinstance(func.value, cst.Attribute)
        and func.value.attr.value == "__dict__"
    ):
        module = func.value.value  # `models.__dict__[args.model]`
    elif (
        isinstance(func, cst.Call)
        and _GETATTR in index.qualnames(func.func)
        and len(func.args) >= 2
    ):
        module = func.args[0].value  # `getattr(models, args.arch)`
    candidates = looked_up_models(index, func)
    if module is not None:
        names = sorted(index.qualnames(module))
        local = set(index.project.local_imports)
        how = f"the local module `{names[0]}`" if names else "a local module"
        if candidates is None and not any(n.split(".")[0] in local for n in names):
            return None
        return how, candidates or ()
    if candidates is None or not isinstance(func, cst.Subscript):
        return None
    return f"`{code(func.value)}`", candidates


def unread_reason(fact: HelperFact, depth: int = 0) -> str:
    """Why the candidate ``fact`` is not shown plain, as a phrase (the first
    fact beyond ``_PLAIN``); "" when it is plain."""
    for field in fields(fact):
        if field.name in _PLAIN:
            continue
        value = getattr(fact, field.name)
        if value == field.default:
            continue
        if field.name == "draws":
            # a draw of `__init__` (`weight.uniform_()`) makes the initial
            # weights, which preparing the model makes the main process's
            called = [(m, w) for m, w in value if m != "__init__"]
            if not called:
                continue
            method, what = called[0]
            return f"{fact.where}: `{method}` draws {what}"
        text = value if isinstance(value, str) else f"it has `{field.name}` facts"
        return f"{fact.where}: {text}"
    if fact.kind != "class":
        if fact.model_class is None:
            return f"{fact.where}: a factory whose model class is not known"
        if depth < 3:
            return unread_reason(fact.model_class, depth + 1)
    return ""
