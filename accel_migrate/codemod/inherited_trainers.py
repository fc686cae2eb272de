"""Classes that train through what a base class of another local module
builds: the project view's ``HelperFact.trains_own`` for them.

Two shapes of real projects:

- the base trains models of its own and the class only specialises it:
  pytorch_tabnet's ``TabNetClassifier(TabModel)`` in tab_model.py, whose base
  in abstract_model.py builds the network and its optimizer inside ``fit`` and
  calls backward in ``_train_batch``;
- the base builds the models and their optimizers and the class writes the
  step: FeatureLearningRotNet's ``ClassificationModel(Algorithm)``, whose
  ``process_batch`` calls ``loss_total.backward()`` and
  ``self.optimizers["model"].step()`` over the networks and optimizers that
  algorithms/Algorithm.py builds from the experiment's config.

A script that only builds such an object and calls its methods trains through
it; AM004 leaves the script whole with a finding naming the file to migrate
(``HelperFact.trains_in``: the base's, where the models are built), instead of
skipping it as "not a training entry point" with no finding.

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .project_nodes import _own_nodes, self_attribute

if TYPE_CHECKING:
    from .project_facts import HelperFact
    from .project_helpers import HelperFacts


def inherited_training(owner: HelperFacts, cls: ast.ClassDef) -> tuple[str, str]:
    """How ``cls`` trains through a base the project defines (read in the base's
    own module), as a phrase for a finding, and the file where the base builds
    what it trains; ("", "") when it does not."""
    backward = _own_backward(cls)
    for base in cls.bases:
        target = owner.resolve(base)
        if not isinstance(target, tuple):
            continue
        fact = owner._follow(target)
        if fact is None or fact.kind != "class" or fact.collectives:
            continue
        if fact.trains_own:
            inner = fact.trains_own
            if not inner.startswith("its base "):
                inner = f"its base {fact.where}: {inner}"
            return inner, fact.trains_in or fact.file
        if backward is not None and fact.builds_optimizer:
            inner = fact.builds_optimizer
            if not inner.startswith("its base "):
                inner = f"its base {fact.where}: {inner}"
            return (
                f"`{backward[0]}` calls backward (line {backward[1]}), and {inner}",
                fact.file,
            )
    return "", ""


def _own_backward(cls: ast.ClassDef) -> tuple[str, int] | None:
    """The first method of ``cls`` that calls ``.backward()``, with its line."""
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _own_nodes(method):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "backward"
            ):
                return method.name, node.lineno
    return None


def own_built_attributes(cls: ast.ClassDef) -> tuple[str, ...]:
    """The attributes of ``self`` that the methods ``cls`` defines itself set
    from a call (NCF's ``NeuMFEngine.__init__``: ``self.model =
    NeuMF(config)`` before ``super().__init__(config)`` builds the optimizer
    over it; dkt-public's ``set_model``: ``self.model =
    self.args.model(self.args)``): a class that trains through its base may
    build what it trains in its own file, not the base's."""
    found: list[str] = []
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _own_nodes(method):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            for target in node.targets:
                name = self_attribute(target)
                if name is not None and name not in found:
                    found.append(name)
    return tuple(found)


def built_where(fact: HelperFact) -> tuple[str, str]:
    """Where the models and optimizers a class of another file trains are
    built, for AM004's finding, and where to prepare them, for its advice:
    the base's file (``trains_in``), or, where the class sets attributes
    itself (``own_builds``: NCF's ``NeuMFEngine`` sets ``self.model``, its
    base ``Engine`` builds the optimizer over it), its own file too."""
    where = fact.trains_in or fact.file
    if not fact.own_builds or fact.trains_in in ("", fact.file):
        return where, where
    shown = ", ".join(f"`self.{a}`" for a in fact.own_builds[:3])
    return (
        f"{fact.file} (where the class sets {shown}) and {fact.trains_in} "
        "(its base's)",
        "those files",
    )
