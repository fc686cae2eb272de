"""Draws for each sample of a loader a helper function builds
(``HelperFact.sample_draws``): kamalesh0406/Audio-Classification's
``fetch_dataloader(folds, batch_size, ...)`` in dataloaders/datasetaug.py
returns ``DataLoader(AudioDataset(folds, train=True), ...)``, whose
``__getitem__`` crops a random window and masks random mel bands and frames
(``random.randrange``). The script that calls it shards the loader it gets
back, so each process runs ``__getitem__`` for its own share of the samples,
drawing from its own random state: the samples do not get the original's
numbers. AM020 reports it at the call (``imported_draws.loader_draw``), as it
does a torchvision random augmentation the helper builds
(``HelperFact.augmentation``).

Only datasets the helper builds by a call of a class of the project (its own
module's, or one it imports) count, and only the draws of that class's
``__getitem__`` or ``__iter__`` (``project_draws.class_draws``, inherited
methods included): data drawn once while the dataset is built is the same on
every process.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts

#: What a data loader runs of its dataset for each sample (or stream).
SAMPLE_METHODS = ("__getitem__", "__iter__")


def sample_draws(
    facts: HelperFacts, function: ast.FunctionDef | ast.AsyncFunctionDef
) -> str:
    """The first draw, as a phrase (``"`random.randrange` in
    `AudioDataset.__getitem__`"``), that a dataset class the function builds
    makes for each sample; "" if none."""
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        target = facts.resolve(node.func)
        if not isinstance(target, tuple) or not target[1]:
            continue
        fact = facts._follow(target)
        if fact is None or fact.kind != "class":
            continue
        draws = dict(fact.draws)
        for method in SAMPLE_METHODS:
            if method in draws:
                return f"{draws[method]} in `{fact.name}.{method}`"
    return ""
