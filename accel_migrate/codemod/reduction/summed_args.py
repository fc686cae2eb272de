"""Is a call of a local module's sum-reduced loss a sum over this batch?

A loss function of another file may add a term summed over one of its parameters
(``torch.sum(torch.abs(code))``) or scaled by one (``beta``): project_sum_terms
notes them. Where it is called, each summed parameter must be handed a model's
output for this batch (``recon, code = model(data)``; a model's weights are
element-wise too, but summing them is no sum over samples), and each scale a
number or a setting (``args.beta``), the same on every process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .facts import _setting
from .model_classes import called_model

if TYPE_CHECKING:
    from ..analysis import ModuleIndex
    from ..project_facts import HelperFact


def unproven_sum(index: ModuleIndex, helper: HelperFact, call: cst.Call) -> str:
    """Why ``call`` does not make ``helper``'s summed terms sums over this batch
    ("" when it does, or when the helper has none)."""
    given: dict[str, cst.BaseExpression] = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            return f"{helper.where} is called with *args here"
        if arg.keyword is not None:
            given[arg.keyword.value] = arg.value
        elif i < len(helper.params):
            given[helper.params[i]] = arg.value
    for name in helper.summed_params:
        value = given.get(name)
        if value is None or not _model_output(index, value, 0):
            return (
                f"{helper.where} adds a sum over the elements of its parameter "
                f"`{name}`, and what this call passes for it is not known to be a "
                "model's output for this batch: the term may not be a sum over it"
            )
    for name in helper.scale_params:
        value = given.get(name)
        if value is not None and not (
            isinstance(value, (cst.Integer, cst.Float)) or _setting(index, value)
        ):
            return (
                f"{helper.where} scales a term by its parameter `{name}`, and this "
                "call passes a value that may differ between the processes"
            )
    return ""


def _model_output(index: ModuleIndex, value: cst.BaseExpression, depth: int) -> bool:
    """Is ``value`` a model's output: its call, an item of it, or a variable
    every assignment of which is one (``recon, code = model(data)``)?"""
    if depth > 4:
        return False
    if isinstance(value, cst.Subscript):
        return _model_output(index, value.value, depth + 1)
    if isinstance(value, cst.Call):
        return called_model(index, value) is not None
    key = index.key(value) if isinstance(value, cst.Name) else None
    if key is None:
        return False
    values = index.values.get(key, [])
    plain = [v for v in values if v is not None]
    # (an item unpacked from a tuple is a None value: its source is kept apart)
    unpacked = [source for source, _, _ in index.unpacked.get(key, [])]
    if not values or len(plain) + len(unpacked) < len(values):
        return False
    return all(_model_output(index, v, depth + 1) for v in plain + unpacked)
