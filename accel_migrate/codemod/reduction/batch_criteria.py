"""A criterion that the batch's other files hand a function or a class of this
file (``CallSite.reductions``, read by ``project_callers``).

``engine.py``'s ``train_one_epoch(model, loader, criterion, optimizer)`` does
``loss = criterion(model(x), y); loss.backward()``, and main.py builds
``criterion = nn.MSELoss(reduction="sum")`` and hands it in. Migrating the folder,
the reduction analysis of engine.py saw a parameter it could not follow and took
the loss for a mean over samples: the runtime averaged the processes' summed
losses, half the original's gradient at two processes, with no finding. Within
one file ``traced_criteria.traced_loss_modules`` follows the arguments of the
function's calls; across files the callers' facts say what each hands in.

Read where the criterion is a parameter of the function the call is in (a
module-level function or a method: ``Trainer.train``), or an attribute
``self.criterion`` that the class's ``__init__`` sets once from a parameter
(``Trainer(..., criterion=criterion)``), no other value is bound to it in this
file, and every call of the function from the batch's other files hands that
parameter a ``torch.nn`` loss module: one reduction that every caller's module
has. A sum is a sum; a per-element module (``reduction="none"``) is per
element, as the one built beside the call; a mean over samples is left to the
other rules, as before. Callers that disagree, a token or class-weighted mean,
or a reduction the callers do not show, make it unknown, with the reason; so
does a sum handed to a method or kept by a class (``self.criterion``): a
subclass's instances and a write of the attribute in another file are not seen
(rev19a), so only a module-level function's sum is proven. A
function this file also calls itself, with a criterion of its own, is read only
where every caller from the other files hands a mean (else unknown).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..index_syntax import parameter_names
from ..names import MODULE_MOVES
from ..patterns import self_attribute, strip_methods
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex
    from ..project_call_sites import CallSite
    from .facts import Fact


def batch_handed_criterion(
    index: ModuleIndex, call: cst.Call, func: cst.BaseExpression
) -> Fact | None:
    """The reduction of ``func(...)`` (``call``) where the batch's other files
    hand ``func`` in (see the module docstring); None where they do not, or
    hand a mean over samples."""
    from .facts import Fact

    found = _handed(index, call, func)
    if found is None:
        return None
    parameter, function, sites = found
    reductions = {
        s.reduction(parameter) if s.kind(parameter) == "criterion" else ""
        for s in sites
    }
    if reductions == {"mean"}:
        return None
    where = ", ".join(sorted({s.where for s in sites}))
    if "" in reductions and len(reductions) == 1:
        return None  # not a loss module anywhere: the other rules'
    # A method's callers (a subclass's instances, a write of the instance's
    # attribute in another file after it is built) are not all seen: its
    # criterion is no proven sum (rev19a: `trainer.criterion = ...` in main.py,
    # `class FineTuner(Trainer)` trained with a mean).
    method = _class_of(index, function) is not None
    if len(reductions) == 1 and not index.call_sites(function) and not method:
        (reduction,) = reductions
        if reduction == "sum":
            return Fact("sum", what=f"the criterion {where} hands in")
        if reduction == "none":
            return Fact("elements", unranked=code(call))
    shown = ", ".join(sorted(r or "not a loss module" for r in reductions))
    return Fact(
        "unknown",
        f"`{code(func)}` is the criterion that {where} hands "
        f"`{function.name.value}` ({shown}): "
        + _why(reductions, bool(index.call_sites(function)), method)
        + "; pass accel.backward(reduction=...) the reduction it has",
    )


def _why(reductions: set[str], called_here: bool, method: bool) -> str:
    if len(reductions) > 1:
        return "the reductions its callers hand in differ"
    if called_here:
        return "this file calls it too, with a criterion of its own"
    if method and reductions <= {"sum", "none"}:
        return (
            "a class's criterion, which a subclass or a write of the instance's "
            "attribute in another file may replace, so the sum cannot be proven "
            "here"
        )
    if reductions == {"unknown"}:
        return (
            "a loss whose reduction over the batch the analysis cannot read "
            "(a function that sums terms of what it is handed, or a module "
            "whose settings are not written where it is built)"
        )
    return (
        "a reduction over the batch that differs from a mean over samples (a "
        "mean over the tokens or class weights of this process's share)"
    )


def _handed(
    index: ModuleIndex, call: cst.Call, func: cst.BaseExpression
) -> tuple[str, cst.FunctionDef, tuple[CallSite, ...]] | None:
    """The parameter the batch's callers bind ``func`` to, the function whose
    parameter it is and their calls of it."""
    if not index.project.callers:
        return None
    function = index.enclosing_function(call)
    if function is None:
        return None
    if isinstance(func, cst.Name):
        key = index.key(func)
        if (
            func.value not in parameter_names(function)
            or key != index.function_scope_key(function, func.value)
            or any(v is not None for v in index.values.get(key, ()))
        ):
            return None
        return _sites(index, function, func.value)
    attribute = self_attribute(func)
    cls = _class_of(index, function)
    if attribute is None or cls is None:
        return None
    init = next(
        (
            s
            for s in cls.body.body
            if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"
        ),
        None,
    )
    if init is None:
        return None
    values = index.values.get(index.key(func), [])  # type: ignore[arg-type]
    if len(values) != 1 or values[0] is None:
        return None
    # `self.criterion = criterion.to(device)`: the handed module, moved
    value = strip_methods(values[0], MODULE_MOVES)
    if not isinstance(value, cst.Name):
        return None
    if (
        value.value not in parameter_names(init)
        or index.enclosing_function(value) is not init
        or index.values.get(index.key(value))  # type: ignore[arg-type]
    ):
        return None
    return _sites(index, init, value.value)


def _sites(
    index: ModuleIndex, function: cst.FunctionDef, parameter: str
) -> tuple[str, cst.FunctionDef, tuple[CallSite, ...]] | None:
    cls = _class_of(index, function)
    if cls is not None and index.enclosing_function(cls) is not None:
        return None
    if cls is None and index.enclosing_function(function) is not None:
        return None  # a nested function: its callers are local
    name = (
        f"{cls.name.value}.{function.name.value}"
        if cls is not None
        else function.name.value
    )
    sites = index.project.callers_of(name)
    if not sites or not any(s.kind(parameter) == "criterion" for s in sites):
        return None
    return parameter, function, sites


def _class_of(index: ModuleIndex, function: cst.FunctionDef) -> cst.ClassDef | None:
    """The class ``function`` is a method of (None for a function)."""
    parent = index.parent(function)
    if isinstance(parent, cst.IndentedBlock):
        parent = index.parent(parent)
    return parent if isinstance(parent, cst.ClassDef) else None
