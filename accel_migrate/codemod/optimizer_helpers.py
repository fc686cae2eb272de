"""Calls of a local module's optimizer factory (``optimizer_factories``), read in
the calling file: which model the optimizer it hands back trains.

``optimizer = build_optimizer(cfg, model)`` with ``build_optimizer`` in optim.py
building its optimizer over ``model``'s parameters (``optimizer_over`` "model"),
or ``optimizer = make_optimizer(model.parameters(), args)`` with
``make_optimizer`` building it over what it is handed ("params"): either way
the optimizer trains ``model``. AM004 counts ``model`` as trained (and prepared
where it is built), AM005 wraps the call with ``accel.prepare_optimizer(...)``.
"""

from __future__ import annotations

import libcst as cst

from .analysis import ModuleIndex
from .patterns import argument
from .project_facts import HelperFact


def factory_of(index: ModuleIndex, call: cst.Call) -> HelperFact | None:
    """The optimizer factory ``call`` calls, when it is one whose trained model
    is known (``HelperFact.optimizer_over``)."""
    fact = index.helper(call.func, "optimizer")
    if fact is None or fact.kind != "function" or not fact.optimizer_over[2]:
        return None
    return fact


def factory_model(index: ModuleIndex, call: cst.Call) -> cst.BaseExpression | None:
    """The model whose parameters the optimizer that ``call`` builds trains:
    the argument it hands the factory's model parameter, or the receiver of the
    ``.parameters()`` it hands its parameters' one; None when ``call`` is no
    such factory's or the argument is neither (a filtered list, ``*args``)."""
    fact = factory_of(index, call)
    if fact is None:
        return None
    name, position, what = fact.optimizer_over
    handed = _argument(call, name, position)
    if handed is None:
        return None
    if what == "model":
        return handed
    if (
        isinstance(handed, cst.Call)
        and isinstance(handed.func, cst.Attribute)
        and handed.func.attr.value == "parameters"
        and not handed.args
    ):
        return handed.func.value
    return None


def _argument(call: cst.Call, name: str, position: int) -> cst.BaseExpression | None:
    """``patterns.argument`` of a call with no ``*args``/``**kwargs`` (None for
    one with them: what they pass cannot be told)."""
    if any(a.star for a in call.args):
        return None
    return argument(call, position, name)
