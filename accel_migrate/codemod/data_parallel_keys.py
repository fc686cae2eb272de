"""Is a model variable always a DataParallel model where its state dict is
taken (AM003's ``model.state_dict()`` of a wrapped model)?

yjxiong/tsn-pytorch's main.py wraps the model unconditionally
(``model = torch.nn.DataParallel(model, device_ids=args.gpus).cuda()``) and
saves ``model.state_dict()``, whose keys are ``module.``-prefixed; its
test_models.py strips the first component of every key
(``'.'.join(k.split('.')[1:])``) before loading them into a bare TSN. The
migrated model has no DataParallel around it: its plain keys, stripped so,
lose their first real component and the test's ``load_state_dict`` fails.
Where the wrap is made on every run, the migrated script writes the
original's keys (``accel.state_dict(model, prefix="module.")``); where it
depends on the machine (``if torch.cuda.device_count() > 1:``), the original's
keys did too, and the plain ones are kept (an info finding says so).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from .analysis import Key, ModuleIndex

#: Statements under which a binding may not run on every run.
_CONDITIONAL = (
    cst.If,
    cst.For,
    cst.While,
    cst.Try,
    cst.With,
    cst.IfExp,
    cst.BooleanOperation,
    cst.Lambda,
)


def always_wrapped(
    index: ModuleIndex,
    key: Key,
    call: cst.Call,
    is_dp: Callable[[cst.CSTNode], bool],
    line: Callable[[cst.CSTNode], int],
) -> bool:
    """Is ``key``'s last binding before ``call``, in the same function, a
    DataParallel wrap made on every pass through that function (under no
    ``if``, loop, ``try`` or ``with``), with no other binding of ``key`` after
    it (``is_dp``: the value makes a DataParallel model, ``DataParallel(m).cuda()``;
    ``line``: a node's line)?"""
    values = [v for v in index.values.get(key, []) if v is not None]
    if not values:
        return False
    function = index.enclosing_function(call)
    last = max(values, key=line)
    if not is_dp(last) or line(last) >= line(call):
        return False
    if index.enclosing_function(last) is not function:
        return False
    for ancestor in index.ancestors(last):
        if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
            return True
        if isinstance(ancestor, _CONDITIONAL):
            return False
    return False
