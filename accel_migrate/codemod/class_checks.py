"""``isinstance`` against libcst's node classes in C, not through ``abc``.

Why: libcst's ``CSTNode`` is an ``abc.ABC``, so every node class has ``ABCMeta``
as its metaclass, and ``isinstance(node, cls)`` for any node class ``cls`` that
is not ``node``'s own exact class (``isinstance(node, cst.BaseExpression)``,
``isinstance(call, cst.Name)``) calls ``ABCMeta.__instancecheck__``: a Python
function (``<frozen abc>``) around the C ``_abc_instancecheck``. The rules and
analyses ask such questions everywhere: about 4 million over the 30-script
profile tree, 5.6% of its Python function calls (docs/performance.md, round
20).

What changes: each node class's metaclass becomes ``_NodeMeta``, an ``ABCMeta``
whose ``__instancecheck__`` and ``__subclasscheck__`` are ``type``'s own: the
class's method resolution order, read in C. ``ABCMeta``'s answer is that same
order plus the classes ``register``-ed with an ABC and what a
``__subclasshook__`` says; libcst registers no class and defines no hook
(``tests/codemod/test_class_checks.py`` checks both, and every answer for
every pair of node classes), so for libcst's own classes every answer is the
same. Classes derived later from a node class get ``_NodeMeta`` too (a class
takes its bases' metaclass). Where another user of libcst in the same process
could see a difference, the classes go back to ``ABCMeta`` first: a
``register`` call on a node class, or a class derived later that defines a
``__subclasshook__`` (uninstalled before the hook can be asked). One difference
stays: a class derived from a node class with a metaclass of its own derived
from ``ABCMeta`` gets a metaclass conflict (no code of accel-migrate or libcst
does that; ``uninstall()`` first).

``install()`` (at the engine's import) sets it on every node class libcst
defines; ``uninstall()`` puts ``ABCMeta`` back (for comparisons:
``bench/codemod_profile.py --checks``).
"""

from __future__ import annotations

from abc import ABCMeta

from .identity_hash import _node_classes as node_classes


class _NodeMeta(ABCMeta):
    """``ABCMeta`` with ``type``'s instance and subclass checks (C, by the MRO)."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__

    def __new__(mcls, name, bases, namespace, /, **kwargs):  # type: ignore[no-untyped-def]
        kind = super().__new__(mcls, name, bases, namespace, **kwargs)
        if "__subclasshook__" in namespace:
            # Only ABCMeta asks a hook: every class goes back to it.
            uninstall()
        return kind

    def register(cls, subclass):  # type: ignore[no-untyped-def]
        # The C check reads no registry: every class goes back to ABCMeta first.
        uninstall()
        return ABCMeta.register(cls, subclass)


def install() -> None:
    for kind in node_classes():
        if type(kind) is ABCMeta:
            kind.__class__ = _NodeMeta


def uninstall() -> None:
    """Every node class back to ``ABCMeta``: libcst's own and those derived
    from them since (which took ``_NodeMeta`` from their bases)."""
    import libcst as cst

    todo = [*node_classes(), cst.CSTNode]
    seen: set[int] = set()
    while todo:
        kind = todo.pop()
        if id(kind) in seen:
            continue
        seen.add(id(kind))
        if type(kind) is _NodeMeta:
            kind.__class__ = ABCMeta
        todo += type.__subclasses__(kind)


def installed() -> bool:
    import libcst as cst

    return type(cst.CSTNode) is _NodeMeta and type(cst.Name) is _NodeMeta
