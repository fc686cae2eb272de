"""Namespaces whose parser this migration cannot read: a file migrated alone.

A project often parses its options in one file and trains in another; in
batch mode ``project_namespaces`` reads the caller's parser. Migrated alone
(``accel-migrate trainer.py``), a trainer module's importers are not read::

    # trainer.py (main.py, not migrated with it, parses --local_rank)
    def train(args, model, loader):
        ...
        if args.local_rank in (-1, 0):
            torch.save(model.state_dict(), "m.pt")

``--local_rank`` is the option a script half-written for DDP takes its local
rank by; torchrun passes no ``--local_rank``, and such an option usually
defaults to ``LOCAL_RANK``, which differs between processes. ``assumed`` takes
``<parameter>.local_rank`` for rank-local, and on whatever the parameter is
handed on to in the file (``parsed_namespaces``), for each parameter of a
top-level function that nothing this migration reads calls (no call in the
file, none from the batch's other files), where the file reads a
``.local_rank`` and parses no options of its own: its default cannot be read, and a plain one would be the only case
where the branch is the same on every process. A finding built on it says
so. Reading the attribute by any other name (``args.rank``, ``args.gpu``)
is not taken for a rank: those names are as common in single-GPU scripts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from .project_namespaces import HandedOption

if TYPE_CHECKING:
    from .analysis import ModuleIndex

#: The attribute read: the dest of ``--local_rank`` / ``--local-rank``.
DEST = "local_rank"


@dataclass(frozen=True)
class AssumedOption(HandedOption):
    """``--local_rank`` of a caller this migration does not read."""

    @property
    def origin(self) -> str:
        return (
            f"`LOCAL_RANK` (assumed: `{self.file}` is called from a file not "
            "migrated with this one, whose parser is not read; torchrun passes "
            "no `--local_rank`, and such an option usually defaults to that "
            "variable)"
        )


def assumed(
    index: ModuleIndex,
    handed: dict[cst.FunctionDef, dict[str, tuple[HandedOption, ...]]],
) -> dict[cst.FunctionDef, dict[str, tuple[HandedOption, ...]]]:
    """``{function: {"args.local_rank": (AssumedOption,)}}`` for the
    parameters of the top-level functions of an option-less file that reads a
    ``.local_rank``, where nothing read calls the function."""
    found: dict[cst.FunctionDef, dict[str, tuple[HandedOption, ...]]] = {}
    code = index.code
    if f".{DEST}" not in code or "add_argument" in code or "parse_" in code:
        return found
    from .project_callers import _called_functions

    called = {function: name for name, function in _called_functions(index)}
    for statement in index.module.body:
        if not isinstance(statement, cst.FunctionDef) or statement in handed:
            continue
        if index.call_sites(statement):
            continue
        name = called.get(statement, statement.name.value)
        if index.project.callers_of(name):
            continue  # a batch caller's namespace: `project_namespaces`
        params = statement.params
        names = [p.name.value for p in (*params.posonly_params, *params.params)]
        names += [p.name.value for p in params.kwonly_params]
        for parameter in names:
            # (each: `def train(args)` may hand it on, `fit(args)`, and
            # `parsed_namespaces` follows it; only `.local_rank` is read)
            option = AssumedOption(DEST, "--local_rank", name, 0, "LOCAL_RANK")
            found.setdefault(statement, {})[f"{parameter}.{DEST}"] = (option,)
    return found
