"""A local class and the bases the project defines for it: the lineage whose
methods and ``__init__`` chain an instance has (the pytorch-template
``Trainer(BaseTrainer)``, whose base's ``__init__`` stores the model that
``super().__init__(model, ...)`` hands it; ``library_trainers`` reads it).
Static only: ``ast``, nothing runs."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .project_helpers import HelperFacts
    from .project_view import Target

#: The most classes of one lineage read (a class and its project-defined bases).
_LINEAGE = 8


def class_lineage(facts: HelperFacts, cls: ast.ClassDef) -> list[ast.ClassDef]:
    """``cls`` (of ``facts``'s module) and the bases the project defines (in that
    module or one it imports), depth first, as the method resolution order
    reads them for single inheritance; ``_LINEAGE`` classes at most."""
    return [node for _, node in lineage_owners(facts, cls)]


def lineage_owners(
    facts: HelperFacts, cls: ast.ClassDef
) -> list[tuple[HelperFacts, ast.ClassDef]]:
    """``class_lineage`` with the facts of each class's module, in which its
    own names (its methods' calls, its bases) are read."""
    found: list[tuple[HelperFacts, ast.ClassDef]] = []
    seen: set[Target] = {(facts.path, cls.name)}

    def walk(owner: HelperFacts, node: ast.ClassDef) -> None:
        found.append((owner, node))
        for base in node.bases:
            target = owner.resolve(base)
            located = _class_at(owner, target) if isinstance(target, tuple) else None
            if located is None or len(found) >= _LINEAGE:
                continue
            where, base_class = located
            key = (where.path, base_class.name)
            if key not in seen:
                seen.add(key)
                walk(where, base_class)

    walk(facts, cls)
    return found


def _class_at(
    facts: HelperFacts, target: Target, hops: int = 0
) -> tuple[HelperFacts, ast.ClassDef] | None:
    """The class ``target`` names, following re-exports, with the facts of its
    module (whose names its own bases are read in)."""
    from .project_helpers import HelperFacts

    if hops > _LINEAGE:
        return None
    where = HelperFacts(facts.view, target, facts.roots, facts.script, facts.depth + 1)
    if where.name in where.scan.classes:
        return where, where.scan.classes[where.name]
    alias = where.scan.names.get(where.name)
    if isinstance(alias, tuple) and alias[1]:
        return _class_at(where, alias, hops + 1)
    return None
