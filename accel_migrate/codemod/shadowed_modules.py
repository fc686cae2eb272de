"""Why a model built from a module that the model's own name shadows cannot be
wrapped (AM004's story, ``AllOrNothing._story``): salesforce/awd-lstm-lm's
``model = model.RNNModel(...)`` after ``import model``, where ``model_load``
above it declares ``global model`` and assigns it. In the text, ``model`` is
bound again between the import and the build, so which ``model`` the build
reads (the module, or whatever the function left there) is not known to the
rule, and it does not wrap the build (``PrepareModel._reads_import``: a name
read where only imports bound it so far is the module). This module words that
precisely: the name, the import, and the binding in between.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .scopes import ImportAssignment, ScopeProvider
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import Key
    from .rule import Rule


def shadowed_module(
    rule: Rule, key: Key, value: cst.BaseExpression, line: Callable[[cst.CSTNode], int]
) -> str:
    """A sentence on the module that ``value`` reads through the name of the
    model it builds (``key``), bound again before it in the text; "" when it
    reads none so."""
    for name in findall(value, m.Name()):
        if not isinstance(name, cst.Name) or rule.index.key(name) != key:
            continue
        scope = rule.get_metadata(ScopeProvider, name, None)
        if scope is None:
            continue
        here = line(name)
        earlier = sorted(
            (
                a
                for a in scope[name.value]
                if a.node is not None and 0 < line(a.node) < here
            ),
            key=lambda a: line(a.node),
        )
        imports = [a for a in earlier if isinstance(a, ImportAssignment)]
        others = [a for a in earlier if not isinstance(a, ImportAssignment)]
        if not imports or not others:
            continue
        other = others[0].node
        where = f"line {line(other)}"
        function = next(
            (
                f
                for f in rule.index.ancestors(other)
                if isinstance(f, cst.FunctionDef)
            ),
            None,
        )
        if function is not None:
            where += (
                f", in `{function.name.value}()`, which declares "
                f"`global {name.value}`"
            )
        return (
            f"it reads `{name.value}` as the module imported at line "
            f"{line(imports[0].node)}, but `{name.value}` is bound again between "
            f"that import and this build ({where}), so accel-migrate cannot tell "
            f"that `{name.value}` still names the module here; import the module "
            f"under another name (`import {name.value} as {name.value}_module`) or "
            "give the model another name, then wrap it with "
            "accel.prepare_model(...)"
        )
    return ""
