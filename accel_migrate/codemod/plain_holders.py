"""Plain classes that hold models: pointer_summarizer's ``class Model(object)``
builds an encoder, a decoder and a reduce-state module and keeps them as
attributes; the training file builds ``self.model = Model(path)`` and an
optimizer over ``list(self.model.encoder.parameters()) + ...``.

The optimizer's parameters lead back to the holder (``root_key``), but the
holder is not an nn.Module: ``accel.prepare_model(Model(path))`` fails at run
time, and nothing in the training file can prepare the modules the holder
builds inside its own ``__init__``. AM004 asks ``plain_class`` and leaves such a
setup whole, with a needs-review finding naming the holder.

``plain_bases`` is read by the project view (``project_helpers``, stdlib
``ast``: the fact ``HelperFact.plain``); ``plain_class`` by the rule (libcst).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import ModuleIndex


def plain_bases(cls: ast.ClassDef) -> bool:
    """Does ``cls`` derive from nothing but ``object`` (and set no metaclass)?
    Then it is no nn.Module, whatever its attributes hold."""
    if cls.keywords:
        return False
    return all(isinstance(b, ast.Name) and b.id == "object" for b in cls.bases)


def _plain_cst(cls: cst.ClassDef) -> bool:
    import libcst as cst

    if cls.keywords:
        return False
    return all(
        isinstance(b.value, cst.Name)
        and b.value.value == "object"
        and b.keyword is None
        for b in cls.bases
    )


def plain_class(index: ModuleIndex, func: cst.BaseExpression) -> str | None:
    """The phrase naming the plain class ``func`` calls (``Model`` in
    model.py), or None when ``func`` is not a class known to be plain: one of
    this file, or of a local module (the project view's ``HelperFact.plain``)."""
    local = index.local_class(func)
    if local is not None:
        return f"`{local.name.value}`" if _plain_cst(local) else None
    fact = index.helper(func)
    if fact is not None and fact.kind == "class" and fact.plain:
        return f"`{fact.name}` in {fact.file}"
    return None
