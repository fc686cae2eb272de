"""Trainer classes picked by name from a local module: FeatureLearningRotNet's
``algorithm = getattr(alg, config['algorithm_type'])(config)`` then
``algorithm.solve(dloader_train, dloader_test)``, where ``alg`` is the local
package ``algorithms`` whose classes (``ClassificationModel``,
``FeatureClassificationModel``) train models their base builds.

The script has no loop of its own and names no class, so AM004's reading of
library trainers (a call of a class it can name) does not see one; yet the
script trains through whichever class the name picks. ``picked_trainers``
finds such calls: the classes of that module that train (``HelperFact.trains``
or ``trains_own``), so that AM004 leaves the script whole with a finding that
names them, instead of skipping it as "not a training entry point".

Static only: reads the analysis's qualified names, nothing runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from .project_facts import HelperFact
from .project_file_facts import ProjectFacts

#: The builtin that picks a class by name.
_GETATTR = "builtins.getattr"


def picked_trainers(
    calls: list[cst.Call], qualnames, project: ProjectFacts | None
) -> Iterator[tuple[cst.Call, str, tuple[HelperFact, ...]]]:
    """Each call ``getattr(M, name)(...)`` whose ``M`` is a local module with
    classes that train and call no collective themselves: (the call, the
    module's qualified name, those classes' facts)."""
    if project is None:
        return
    trainers = [
        (name, fact)
        for name, fact in project.helpers
        if fact.kind == "class"
        and (fact.trains or fact.trains_own)
        and not fact.collectives
    ]
    if not trainers:
        return
    for call in calls:
        inner = call.func
        if not (
            isinstance(inner, cst.Call)
            and _GETATTR in qualnames(inner.func)
            and inner.args
        ):
            continue
        for module in sorted(qualnames(inner.args[0].value)):
            found = tuple(
                fact for name, fact in trainers if name.startswith(module + ".")
            )
            if found:
                yield call, module, found
                break
