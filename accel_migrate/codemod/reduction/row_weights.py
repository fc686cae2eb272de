"""A loss term weighed by a number read off the batch's row count.

``loss = recons + kld_weight * kld`` with ``kld_weight = x.size(0) /
len(dataset)`` (a VAE's minibatch share of the dataset): the term is a mean
times the batch size over a constant, a sum over the batch in disguise. Each
process computes the weight from its own share, so a mean-weighted migration
trains the original's loss with that term scaled by the share: neither a mean
nor a sum of the processes' losses rebuilds it. The weight may be written
where the loss is (``0.5 * x.size(0) * kld``) or handed to the function or
method that computes the loss (``model.loss_function(..., kld_weight=...)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from ..analysis import bind_arguments
from .facts import _counts_samples
from .placement import code

if TYPE_CHECKING:
    from ..analysis import ModuleIndex


def row_count_weight(index: ModuleIndex, factor: cst.BaseExpression) -> str:
    """Why a reduced loss times ``factor`` has no known reduction, where
    ``factor`` reads the batch's row count (itself, or as the argument a call
    hands the parameter it names); "" otherwise."""
    if _reads_row_count(index, factor):
        return _reason(code(factor))
    if not isinstance(factor, cst.Name):
        return ""
    function = index.enclosing_function(factor)
    if function is None or index.key(factor) != index.function_scope_key(
        function, factor.value
    ):
        return ""
    bound = 1 if index.enclosing_class(function) is not None else 0
    name = function.name.value
    for call in index.calls:
        func = call.func
        called = (isinstance(func, cst.Name) and func.value == name) or (
            isinstance(func, cst.Attribute) and func.attr.value == name
        )
        if not called:
            continue
        for parameter, argument in bind_arguments(function, bound, call):
            if parameter == factor.value and _reads_row_count(index, argument):
                return _reason(f"{factor.value}={code(argument)}")
    return ""


def method_row_weight(index: ModuleIndex, call: cst.Call) -> str:
    """Why the loss ``model.loss_function(..., kld_weight=x.size(0) / n)``
    returns has no known reduction, where ``model`` holds an instance of a
    model class of another module whose method weighs a term by the parameter
    (``HelperFact.method_weights``) that this call hands a value read off the
    batch's row count; "" otherwise."""
    from ..imported_draws import instance_facts

    func = call.func
    if not isinstance(func, cst.Attribute) or any(a.star for a in call.args):
        return ""
    name = func.attr.value
    for fact in sorted(instance_facts(index, func.value), key=lambda f: f.name):
        for method, positional, weights in fact.method_weights:
            if method != name:
                continue
            given = {
                (a.keyword.value if a.keyword is not None else positional[i]): a.value
                for i, a in enumerate(call.args)
                if a.keyword is not None or i < len(positional)
            }
            for weight in weights:
                argument = given.get(weight)
                if argument is not None and _reads_row_count(index, argument):
                    return _reason(
                        f"{weight}={code(argument)}",
                        f" (handed to `{fact.name}.{method}` in {fact.file})",
                    )
    return ""


def _reads_row_count(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    """A row count of the batch (``x.size(0)``, ``len(x)``), or a product or
    quotient with one as a factor or numerator (``x.size(0) / len(dataset)``)."""
    if _counts_samples(index, expr):
        return True
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Multiply):
            return _reads_row_count(index, expr.left) or _reads_row_count(
                index, expr.right
            )
        if isinstance(expr.operator, cst.Divide):
            return _reads_row_count(index, expr.left)
    return False


def _reason(weight: str, where: str = "") -> str:
    return (
        f"the loss weighs a term by `{weight}`{where}, which reads the batch's row "
        "count: "
        "each process would weigh it by its own share's size, not the global "
        "batch's, so the term is a sum over the batch in disguise and neither a "
        "mean nor a sum of the processes' losses gives the original's; compute "
        "the weight from a constant (the configured batch size) or from the "
        "global batch's row count"
    )
