"""Zipped parts handed in: AM028's reading of ``zip(loader, weights)`` where
``weights`` is a parameter of the loop's function."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from . import python_ast
from .index_syntax import _all_params

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def handed_zip_parts(
    index: ModuleIndex, node: cst.For, parts: list[cst.BaseExpression]
) -> bool:
    """Is a zipped part a parameter of the loop's function that a call of the
    file, made with an argument that differs between processes
    (``divergence.local_calls``), hands something other than a literal?
    ``train(loader, weights, epoch)`` with ``weights = [1.0] * (3 +
    len(hard))`` and ``hard`` grown under a test of this process's share:
    the divergence analysis makes a parameter rank-local only from a rank
    read (a helper handed this process's data is the data's business), but
    the loop's count is the shorter of the two."""
    function = next(
        (a for a in index.ancestors(node) if isinstance(a, cst.FunctionDef)),
        None,
    )
    if function is None:
        return False
    names = {p.value for p in parts if isinstance(p, cst.Name)}
    params = {p.name.value for p in _all_params(function.params)} & names
    if not params:
        return False
    local_calls = index.divergence.local_calls
    for call in index.call_sites(function):
        if call not in local_calls:
            continue
        for key, value in index.arguments(call):
            if key is not None and key[1] in params and not _literal(value):
                return True
    return False


def _literal(node: cst.BaseExpression) -> bool:
    try:
        python_ast.literal_eval(cst.Module([]).code_for_node(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True
