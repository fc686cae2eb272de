"""Does an ``if`` leave the block it is in?

A process that takes an arm holding a ``return``, ``break``, ``continue``,
``raise`` or an exit call does not reach the statement after the ``if``: a
collective placed there (``accel.barrier()`` after a file-system test, AM010)
would wait for it forever.
"""

from __future__ import annotations

import libcst as cst

from .analysis import attr_chain

_EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
_EXITS = (cst.Return, cst.Break, cst.Continue, cst.Raise)


def leaves_block(branch: cst.If | cst.Try | cst.TryStar) -> bool:
    """Does any arm of ``branch`` (an ``if``, a ``try``) hold an exit outside a nested function or
    class? (A loop inside the arm whose own ``break`` stays in it counts too:
    conservative.)"""
    stack: list[cst.CSTNode] = [branch]
    while stack:
        node = stack.pop()
        if isinstance(node, _EXITS):
            return True
        if isinstance(node, cst.Call) and attr_chain(node.func) in _EXIT_CALLS:
            return True
        if node is not branch and isinstance(
            node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        ):
            continue
        stack.extend(node.children)
    return False
