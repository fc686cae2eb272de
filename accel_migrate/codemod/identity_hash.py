"""libcst nodes hashed and compared by identity in C, not in Python.

Why: every analysis of the engine keys dicts and sets by node (the scope mapping,
parents, positions, preorders, the module index's tables, the divergence
analysis's results), and libcst gives each node class ``__hash__`` (``return
id(self)``) and ``__eq__`` (``return self is other``) written in Python
(``CSTNode.__init_subclass__`` copies them onto every class): a Python call per
dict insert or lookup, about 5 million over the 30-script profile tree
(docs/performance.md, round 19). ``object``'s own ``__hash__`` and ``__eq__``
are the same relation (identity) in C.

What changes: nothing a caller can see but the hash *values* (``object``'s is
the address shifted, libcst's the address): two nodes are equal exactly when
they are the same object, as before, and ``hash(node)`` stays constant for the
node's life. The iteration order of a set of nodes, which follows the hash
values, was an order of addresses before and is another one now; no output may
depend on it (the addresses differ from run to run); every golden is
byte-identical with and without (``tests/codemod/test_identity_hash.py``).

``install()`` (at the engine's import) sets them on every node class libcst
defines; ``uninstall()`` puts libcst's back (for comparisons:
``bench/codemod_profile.py --hashes``).
"""

from __future__ import annotations

import libcst as cst

_PYTHON_HASH = cst.CSTNode.__dict__["__hash__"]
_PYTHON_EQ = cst.CSTNode.__dict__["__eq__"]


def _node_classes() -> list[type]:
    found: list[type] = []
    pending: list[type] = [cst.CSTNode]
    while pending:
        kind = pending.pop()
        if kind not in found:
            found.append(kind)
            pending.extend(kind.__subclasses__())
    return found


def install() -> None:
    """Identity in C for every node class (those that have libcst's Python
    methods: a class with its own is left alone)."""
    for kind in _node_classes():
        if kind.__dict__.get("__hash__") is _PYTHON_HASH:
            kind.__hash__ = object.__hash__  # type: ignore[assignment]
        if kind.__dict__.get("__eq__") is _PYTHON_EQ:
            kind.__eq__ = object.__eq__  # type: ignore[assignment,method-assign]


def uninstall() -> None:
    for kind in _node_classes():
        if kind.__dict__.get("__hash__") is object.__hash__:
            kind.__hash__ = _PYTHON_HASH  # type: ignore[assignment]
        if kind.__dict__.get("__eq__") is object.__eq__:
            kind.__eq__ = _PYTHON_EQ  # type: ignore[assignment,method-assign]


def installed() -> bool:
    return cst.Name.__dict__.get("__hash__") is object.__hash__
