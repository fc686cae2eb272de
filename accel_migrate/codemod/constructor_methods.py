"""A model class's alternative constructors: class methods that hand back a new
instance of the class (``GPT.from_pretrained(config)`` in nanoGPT's model.py,
and a user's own ``from_pretrained`` stand-ins), read from another module's
class by the project view (``HelperFact.constructor_methods``), or from this
file's own model class, read the same way (``reduction.model_classes.own_model``).

``model = GPT.from_pretrained(...)`` builds a model as ``GPT(...)`` does: AM004
prepares it. Before, such a call was no model to AM004: the model was left
unwrapped while its loaders were sharded, each process stepping its own share's
gradients, with no finding (a LoRA fine-tuning trial of t11a). Until issue 12,
the same call of a class of the migrated file itself (``Net.build(cfg)``) was no
model either: with the optimizer over ``trainable(model)``, the model was left
unprepared while its loader was sharded.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .project_nodes import _own_nodes

if TYPE_CHECKING:
    import libcst as cst

    from .analysis import ModuleIndex
    from .project_facts import HelperFact


def constructor_methods(cls: ast.ClassDef) -> tuple[str, ...]:
    """The ``@classmethod`` methods of ``cls`` whose every return is
    ``cls(...)`` (or the class's own name called), or a name that the method
    binds only to such a call."""
    found = []
    for method in cls.body:
        if not isinstance(method, ast.FunctionDef) or not _is_classmethod(method):
            continue
        if not method.args.args:
            continue
        own = {method.args.args[0].arg, cls.name}
        returns = [r for r in _own_nodes(method) if isinstance(r, ast.Return)]
        if returns and all(_builds(r.value, method, own) for r in returns):
            found.append(method.name)
    return tuple(found)


def _is_classmethod(method: ast.FunctionDef) -> bool:
    return any(
        isinstance(d, ast.Name) and d.id == "classmethod" for d in method.decorator_list
    )


def _new_instance(value: ast.expr | None, own: set[str]) -> bool:
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in own
    )


def _builds(value: ast.expr | None, method: ast.FunctionDef, own: set[str]) -> bool:
    if _new_instance(value, own):
        return True
    if not isinstance(value, ast.Name):
        return False
    bound = [
        node
        for node in ast.walk(method)
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For))
        and any(
            isinstance(t, ast.Name) and t.id == value.id
            for target in (
                node.targets if isinstance(node, ast.Assign) else [node.target]
            )
            for t in ast.walk(target)
        )
    ]
    withs = [
        item
        for node in ast.walk(method)
        if isinstance(node, ast.With)
        for item in node.items
        if isinstance(item.optional_vars, ast.Name)
        and item.optional_vars.id == value.id
    ]
    return (
        bool(bound)
        and not withs
        and all(
            isinstance(node, ast.Assign) and _new_instance(node.value, own)
            for node in bound
        )
    )


def constructed_class(
    index: ModuleIndex, func: cst.BaseExpression
) -> HelperFact | None:
    """The model class whose constructor method ``func`` names
    (``GPT.from_pretrained``): a local module's, where the project view read it
    as one, or this file's own (read as the project view reads another file's)."""
    # here, not at the top: the project view imports this module on the cache-hit
    # path, which must not import libcst (tests/cli/test_cache.py)
    import libcst as cst

    from .reduction.model_classes import own_model

    if not isinstance(func, cst.Attribute):
        return None
    fact = index.helper(func.value, "model")
    if fact is None and index.local_class(func.value) is not None:
        fact = own_model(index, func.value)  # `Net.build(cfg)` of this file's Net
    if fact is None or fact.kind != "class":
        return None
    return fact if func.attr.value in fact.constructor_methods else None
