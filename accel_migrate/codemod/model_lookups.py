"""Models looked up by name among a local module's (the project view's facts).

The ImageNet example builds ``model = models.__dict__[args.arch]()``; other
scripts write ``getattr(models, args.model)(num_classes=10)`` or keep a
registry, ``MODELS = {"resnet": ResNet, "vit": ViT}`` and ``MODELS[name]()``.
Which class is built is chosen at run time, so a fact of the model (its
dropout, ``HelperFact.stochastic``) holds only where it holds of every
candidate: this module lists them, for a rule to check each.

- ``X.__dict__[...]`` and ``getattr(X, ...)`` of a local module ``X``: every
  function and class of ``X`` that builds a model (also the ones it
  re-exports, a package's ``from .vgg import *``);
- ``REGISTRY[...]`` of a dict display of this file (assigned once): the
  model-building helpers its values name (also through ``lambda: Net()`` and
  ``functools.partial(Net, depth=2)``), and every one of their modules'
  where a value is not one the view knows;
- ``REGISTRY[...]`` of a name imported from a local module: every
  model-building helper of that module (its dict is not read).

Static only; nothing is imported or run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .project_facts import HelperFact


def looked_up_models(
    index: ModuleIndex, func: cst.BaseExpression
) -> tuple[HelperFact, ...] | None:
    """The candidate model helpers a call of ``func`` may build, where ``func``
    looks a model up by name among a local module's (see the module
    docstring); None where it is no such lookup."""
    if not index.project:
        return None
    if (
        isinstance(func, cst.Call)
        and "builtins.getattr" in index.qualnames(func.func)
        and len(func.args) >= 2
    ):
        return _of_module(index, func.args[0].value)
    if not isinstance(func, cst.Subscript):
        return None
    table = func.value
    if isinstance(table, cst.Attribute) and table.attr.value == "__dict__":
        return _of_module(index, table.value)
    key = index.key(table) if isinstance(table, cst.Name) else None
    values = [v for v in index.values.get(key, ()) if v is not None] if key else []
    if len(values) == 1 and isinstance(values[0], cst.Dict):
        return _of_registry(index, values[0])
    modules = {q.rsplit(".", 1)[0] for q in index.qualnames(table) if "." in q}
    found = _models_under(index, modules)
    return found or None


def _of_module(
    index: ModuleIndex, expr: cst.BaseExpression
) -> tuple[HelperFact, ...] | None:
    found = _models_under(index, index.qualnames(expr))
    return found or None


def _of_registry(index: ModuleIndex, table: cst.Dict) -> tuple[HelperFact, ...] | None:
    found: list[HelperFact] = []
    for element in table.elements:
        if not isinstance(element, cst.DictElement):
            return None  # `**OTHER`: entries not read
        value = _built(index, element.value)
        fact = index.helper(value, returns="model")
        if fact is not None:
            found.append(fact)
            continue
        # a value the view does not read: its module's models, all of them
        modules = {q.rsplit(".", 1)[0] for q in index.qualnames(value) if "." in q}
        found += _models_under(index, modules)
    return tuple(dict.fromkeys(found)) or None


def _built(index: ModuleIndex, value: cst.BaseExpression) -> cst.BaseExpression:
    """What a registry value builds: the class or factory a ``lambda: Net()``
    calls, or the one ``functools.partial(Net, depth=2)`` wraps; else itself."""
    if isinstance(value, cst.Lambda) and isinstance(value.body, cst.Call):
        return value.body.func
    if (
        isinstance(value, cst.Call)
        and "functools.partial" in index.qualnames(value.func)
        and value.args
        and value.args[0].keyword is None
    ):
        return value.args[0].value
    return value


def _models_under(index: ModuleIndex, modules: set[str]) -> tuple[HelperFact, ...]:
    """The helpers of the local modules named ``modules`` that build a model."""
    return tuple(
        fact
        for name, fact in index.project.helpers
        if name.rsplit(".", 1)[0] in modules and fact.returns == "model"
    )
