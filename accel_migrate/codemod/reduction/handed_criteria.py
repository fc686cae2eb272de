"""A criterion that a local module's code hands back, called as the loss.

pytorch-deeplab-xception builds its criterion as ``self.criterion =
SegmentationLosses(weight=weight, cuda=args.cuda).build_loss(mode=args.loss_type)``:
``build_loss`` returns one of the class's bound methods (``self.CrossEntropyLoss``),
which divides the pixel mean by the batch's row count (``loss /= n``). The
project view reads what a function returns when it is a loader, a model, an
optimizer or a loss, not a bound method chosen at run time, so the loss of
``self.criterion(output, target)`` is neither a mean nor a sum the analysis can
show: its reduction is unknown (AM007 then says so), not the mean over samples
that a call the analysis does not know is otherwise taken to keep.

``criterion`` (a name or a ``self.`` attribute) is followed through its
assignments in this file; it is such a criterion when one of them is a method
call on an instance of a local module's class (``Cls(...).build(...)``, also
through a name holding the instance) or a call of a local module's function
whose return the view cannot read (``get_criterion(args)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..names import MODULE_MOVES
from ..patterns import self_attribute, strip_methods
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


def handed_criterion(index: ModuleIndex, func: cst.BaseExpression) -> str:
    """Why the loss ``func(...)`` has no reduction the analysis can read, where
    ``func`` holds a criterion a local module's code hands back; "" otherwise."""
    if isinstance(func, cst.Attribute) and not self_attribute(func):
        return ""
    if not isinstance(func, (cst.Name, cst.Attribute)):
        return ""
    key = index.key(func)
    values = index.values.get(key, ()) if key is not None else ()
    for value in values:
        if value is None:
            continue
        built = strip_methods(value, MODULE_MOVES)
        if not isinstance(built, cst.Call):
            continue
        where = _handed_by(index, built)
        if where:
            return (
                f"the loss is computed by `{code(func)}`, the callable that "
                f"`{code(built)}` hands back ({where}), which the analysis cannot "
                "read: neither a mean nor a sum over the batch's samples can be "
                "assumed"
            )
    return ""


def _handed_by(index: ModuleIndex, call: cst.Call) -> str:
    """``Cls(...).method(...)`` of a local module's class, or ``function(...)`` of
    a local module's function whose return the view cannot read: where it is."""
    func = call.func
    if isinstance(func, cst.Attribute):
        receiver = func.value
        if isinstance(receiver, cst.Name):
            key = index.key(receiver)
            held = index.values.get(key, ()) if key is not None else ()
            receiver = held[0] if len(held) == 1 and held[0] is not None else receiver
        if isinstance(receiver, cst.Call):
            fact = index.helper(receiver.func)
            if fact is not None and fact.kind == "class":
                return f"`{func.attr.value}` of {fact.where}"
        return ""
    fact = index.helper(func)
    if fact is not None and fact.kind == "function" and not fact.returns:
        if fact.container:
            return ""
        return fact.where
    return ""
