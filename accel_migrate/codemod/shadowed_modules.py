"""Why a model built from a module that the model's own name shadows cannot be
wrapped (AM004's story, ``AllOrNothing._story``): salesforce/awd-lstm-lm's
``model = model.RNNModel(...)`` after ``import model``, where ``model_load``
above it declares ``global model`` and assigns it. In the text, ``model`` is
bound again between the import and the build, so which ``model`` the build
reads (the module, or whatever the function left there, if it was called) is
not known to the rule, and it does not wrap the build (``PrepareModel._reads_import``: a name
read where only imports bound it so far is the module). This module words that
precisely: the name, the import, and the binding in between. Only bindings
in functions count: one the module runs itself after the import (``model =
Net()``, then ``model = model.cuda()``) makes the name the model there.
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
        if not imports:
            continue
        after = [a for a in earlier if line(a.node) > line(imports[-1].node)]
        functions = [_function(rule, a.node) for a in after]
        if not after or None in functions:
            # none in between (`model = model.Net()` right after the import), or
            # one the module itself runs (`model = Net()` then `model.cuda()`):
            # the name's value where it is read is known
            continue
        function = functions[0]
        assert function is not None
        where = (
            f"line {line(after[0].node)}, in `{function.name.value}()`, which "
            f"declares `global {name.value}`"
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


def _function(rule: Rule, node: cst.CSTNode) -> cst.FunctionDef | None:
    """The function whose body binds ``node`` (under ``global``); None at the
    module's own level."""
    return next(
        (f for f in rule.index.ancestors(node) if isinstance(f, cst.FunctionDef)),
        None,
    )
