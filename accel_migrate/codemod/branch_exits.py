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
    """Does any arm of ``branch`` (an ``if``, a ``try``) hold an exit outside a
    nested function or class? A ``break`` or ``continue`` in the body of a
    loop inside the arm stays in that loop and does not count (txl's ``try:
    for epoch in itertools.count(): ... break`` reaches the statement after
    the ``try``); one in that loop's ``else`` leaves the loop around it and
    counts, as a ``return``, ``raise`` or exit call anywhere does."""
    stack: list[tuple[cst.CSTNode, bool]] = [(branch, False)]
    while stack:
        node, in_loop = stack.pop()
        if isinstance(node, (cst.Break, cst.Continue)):
            if not in_loop:
                return True
            continue
        if isinstance(node, _EXITS):
            return True
        if isinstance(node, cst.Call) and attr_chain(node.func) in _EXIT_CALLS:
            return True
        if node is not branch and isinstance(
            node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        ):
            continue
        if isinstance(node, (cst.For, cst.While)) and node is not branch:
            for child in node.children:
                stack.append((child, in_loop or child is node.body))
            continue
        stack.extend((child, in_loop) for child in node.children)
    return False
