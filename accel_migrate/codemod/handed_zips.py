"""Zipped parts handed in: AM028's reading of ``zip(loader, weights)`` where
``weights`` is a parameter of the loop's function."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .index_syntax import _all_params

if TYPE_CHECKING:
    from .analysis import ModuleIndex


def handed_zip_parts(
    index: ModuleIndex, node: cst.For, parts: list[cst.BaseExpression]
) -> bool:
    """Is a zipped part a parameter of the loop's function that a call of the
    file hands a value that differs between processes (its rank-local sources)?
    ``train(loader, weights, epoch)`` with ``weights = [1.0] * (3 + len(hard))``
    and ``hard`` grown under a test of this process's share: the divergence
    analysis makes a parameter rank-local only from a rank read (a helper handed
    this process's data is the data's business), but the loop's count is the
    shorter of the two."""
    function = index.enclosing_function(node)
    if function is None:
        return False
    names = {p.value for p in parts if isinstance(p, cst.Name)}
    params = {p.name.value for p in _all_params(function.params)} & names
    if not params:
        return False
    sources = index.rank_local_sources
    return any(
        key is not None and key[1] in params and sources.of(value).sources
        for call in index.call_sites(function)
        for key, value in index.arguments(call)
    )
