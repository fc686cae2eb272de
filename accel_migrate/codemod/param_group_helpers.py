"""Functions of a local module that group one model's parameters for an
optimizer (``HelperFact.param_groups_over``), and the model an optimizer built
over such groups trains (for AM004's ``optimized``).

DINO's ``utils.get_params_groups(model)`` loops over ``model.named_parameters()``
and returns ``[{"params": regularized}, {"params": not_regularized,
"weight_decay": 0.0}]``; ``main_dino.py`` builds ``AdamW(params_groups)`` from
``params_groups = utils.get_params_groups(student)``: the optimizer trains
``student``. (timm's ``param_groups_weight_decay(model, ...)`` and MAE's
``param_groups_lrd(model, ...)`` have the same shape.) A function counts when
the only parameters or modules it reads are those of one of its parameters
(``optimizer_factories._reads``, also through the module's functions it hands
it to) and every return is a list display of dict displays, each with a
``"params"`` key.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .optimizer_factories import _own_nodes, _reads

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import ModuleIndex
    from .optimizer_factories import Functions


def groups_over(
    function: ast.FunctionDef | ast.AsyncFunctionDef, functions: Functions
) -> tuple[str, int]:
    """(parameter, its position among the positional parameters or -1) whose
    parameters ``function`` hands back in groups; ("", -1) where it does not."""
    returns = [n for n in _own_nodes(function) if isinstance(n, ast.Return)]
    if not returns or not all(_groups(r.value) for r in returns):
        return ("", -1)
    read = _reads(function, functions, 0)
    if read is None or len(read) != 1:
        return ("", -1)
    name = next(iter(read))
    positional = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if name in positional:
        return (name, positional.index(name))
    if name in (a.arg for a in function.args.kwonlyargs):
        return (name, -1)
    return ("", -1)


def _groups(value: ast.expr | None) -> bool:
    """Is ``value`` a list display of dict displays with a "params" key each?"""
    return (
        isinstance(value, ast.List)
        and bool(value.elts)
        and all(
            isinstance(e, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value == "params" for k in e.keys)
            for e in value.elts
        )
    )


def params_values(
    index: ModuleIndex, params: cst.BaseExpression
) -> list[cst.BaseExpression | None]:
    """What an optimizer's ``params`` argument is: the call itself, or every
    value of the variable it names."""
    import libcst as cst

    if isinstance(params, cst.Call):
        return [params]
    key = index.key(params)
    return list(index.values.get(key, [])) if key is not None else []


def grouped_argument(
    index: ModuleIndex, params: cst.BaseExpression
) -> cst.BaseExpression | None:
    """The model an optimizer's ``params`` argument groups the parameters of
    (``student`` of ``utils.get_params_groups(student)``, or of a variable whose
    every value is that call); None otherwise. (libcst is imported here: the
    project view imports this module for ``groups_over`` on a run the cache
    answers, which must not load libcst.)"""
    import libcst as cst

    from .patterns import argument

    found: cst.BaseExpression | None = None
    for value in params_values(index, params):
        if not isinstance(value, cst.Call) or any(a.star for a in value.args):
            return None
        fact = index.helper(value.func)
        if fact is None or fact.kind != "function" or not fact.param_groups_over[0]:
            return None
        name, position = fact.param_groups_over
        handed = argument(value, position, name)
        if handed is None or (found is not None and not handed.deep_equals(found)):
            return None
        found = handed
    return found
