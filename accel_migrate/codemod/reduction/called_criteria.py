"""A loss computed by calling an instance of a loss class of a local module:
``myloss = LpLoss(size_average=False)`` with ``class LpLoss`` in
``utilities3.py``, then ``loss = myloss(out, y)``.

The project view reads what calling such an instance returns
(``HelperFact.call_reduction``, ``called_reductions``): a full sum of the batch,
a full mean, or a reduction chosen at run time by a setting of the instance.
The criterion is traced to the calls that build it (``model_classes._Tracer``:
through this file's assignments and the arguments every call of its function
passes). Every construction a class whose call sums: a sum, weighed as one;
every one a mean: a mean (with constructions of other callables, the
caller's reading of those); one chosen at run time, or a sum among other
constructions: unknown, with the reason naming the class and its file. A class the
view reads nothing of (a model returning logits) says nothing: the caller's
default holds. Static only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .facts import Fact
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


def called_criterion_fact(index: ModuleIndex, func: cst.BaseExpression) -> Fact | None:
    """The fact of ``func(...)`` where ``func`` holds an instance of a local
    module's class whose call reduces the batch; None where it is not shown to."""
    from .model_classes import _Tracer

    if not isinstance(func, (cst.Name, cst.Attribute)) or index.key(func) is None:
        return None
    origins = _Tracer(index).origins(func, frozenset(), 0)
    if isinstance(origins, str) or not origins:
        return None
    found: dict[str, tuple[str, str]] = {}
    for origin in origins:
        helper = index.helper(origin.func) if isinstance(origin, cst.Call) else origin
        if helper is None or helper.kind != "class" or not helper.call_reduction[0]:
            continue
        found[helper.where] = helper.call_reduction
    if not found:
        return None
    kinds = {kind for kind, _ in found.values()}
    where = ", ".join(sorted(found))
    if len(found) == len(origins) and kinds in ({"sum"}, {"mean"}):
        kind = kinds.pop()
        return Fact(kind, what=f"the call of `{code(func)}` ({where})")  # type: ignore[arg-type]
    if kinds == {"mean"}:
        return None  # a mean, and the other constructions: the caller's reading
    reasons = [why for kind, why in found.values() if kind == "unknown"]
    detail = reasons[0] if reasons else "its constructions reduce the batch differently"
    return Fact(
        "unknown",
        f"the loss is computed by `{code(func)}`, an instance of {where}: {detail}, "
        'which the analysis cannot tell here; pass reduction="sum" to '
        "accel.backward where it is a sum over the batch",
    )
