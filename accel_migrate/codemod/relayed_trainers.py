"""Classes that train through a trainer class of another local module: Deep
SVDD's ``DeepSVDD`` (deepSVDD.py), whose ``train`` builds
``DeepSVDDTrainer(...)`` of optim/deepSVDD_trainer.py and calls its ``train``,
where the optimizer, the loader and the backward are.

A script that only builds such an object and calls its methods
(``deep_SVDD = DeepSVDD(...); deep_SVDD.train(dataset, ...)``) has no loop of
its own, yet it trains: the setup is two modules away. The project view gives
the relaying class the trainer's ``trains_own`` phrase, prefixed with where it
builds the trainer, so that the script is read as one that trains through a
library (``ProjectFacts.library_trainers``) and AM004 leaves it whole with a
finding that names both classes, instead of skipping it as "not a training
entry point" with no finding.

Static only: ``ast``, nothing runs.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .project_helpers import _own_nodes

if TYPE_CHECKING:
    from .project_helpers import HelperFacts


def trains_through(owner: HelperFacts, cls: ast.ClassDef) -> str:
    """How ``cls`` trains through a class of a local module that it builds in a
    method, as a phrase for a finding (``"`train` builds `DeepSVDDTrainer` in
    optim/deepSVDD_trainer.py (line 52), which trains models of its own there:
    ..."``); "" when no method builds a class whose fact trains (its own models,
    ``trains_own``, or what it is handed, ``trains``) without calling the
    runtime's collectives itself."""
    for method in cls.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in _own_nodes(method):
            if not isinstance(node, ast.Call):
                continue
            target = owner.resolve(node.func)
            if not isinstance(target, tuple) or target == (owner.path, cls.name):
                continue
            fact = owner._follow(target)
            if (
                fact is None
                or fact.kind != "class"
                or fact.collectives
                or not (fact.trains_own or fact.trains)
            ):
                continue
            how = (
                f"models of its own there: {fact.trains_own}"
                if fact.trains_own
                else f"what it is handed there: {fact.trains}"
            )
            return (
                f"`{method.name}` builds {fact.where} (line {node.lineno}), which "
                f"trains {how}"
            )
    return ""
