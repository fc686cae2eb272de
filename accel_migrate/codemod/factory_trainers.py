"""Functions that return an object of a local class that trains: the project
view's ``HelperFact.trains_own`` for them.

ej0cl6/deep-active-learning's utils.py: ``get_net(name, device)`` returns
``Net(MNIST_Net, params[name], device)``, whose ``train`` builds the classifier
and its SGD optimizer and runs the backward (nets.py). demo.py only calls
``net = get_net(...)`` and hands ``net`` to a strategy that calls
``net.train(...)``: it has no loop, loader or optimizer of its own, and was
skipped as "not a training entry point" with no finding. With this fact the
factory is a library trainer: AM004 leaves the script whole and names the
class that trains (``_block_own_trainer``).

Only where the class's file is not migrated in the same batch
(``HelperFact.batch_migrated``): a migrated trainer's callers are decided by
AM103 and ``drives_trainer``.

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts


def returned_trainer(owner: HelperFacts, returns: list[ast.Return]) -> tuple[str, str]:
    """(how the object every ``return`` builds trains, as a phrase for a finding;
    the file where its models are built) when each return is a call of the same
    local class that trains (``trains`` or ``trains_own``) and calls no
    collective; ("", "") otherwise."""
    built = {
        ast.unparse(r.value.func) for r in returns if isinstance(r.value, ast.Call)
    }
    if (
        not returns
        or len(built) != 1
        or len(returns) != sum(isinstance(r.value, ast.Call) for r in returns)
    ):
        return "", ""
    call = returns[0].value
    assert isinstance(call, ast.Call)
    target = owner.resolve(call.func)
    if not isinstance(target, tuple) or not target[1]:
        return "", ""
    fact = owner._follow(target)
    if (
        fact is None
        or fact.kind != "class"
        or not (fact.trains or fact.trains_own)
        or fact.collectives
        or fact.batch_migrated
    ):
        return "", ""
    how = fact.trains_own or fact.trains
    return (
        f"it returns `{ast.unparse(call.func)}(...)`, {fact.where}, which trains: {how}",
        fact.trains_in or fact.file,
    )
