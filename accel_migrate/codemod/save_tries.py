"""A save of a file read back, inside a ``try`` whose ``except`` catches its
error (AM010's barrier placement).

``accel.save`` writes on the main process only, so only the main process can
fail there (a missing folder, a full disk). Inside

```python
try:
    torch.save(stats, STATS)
    stats = torch.load(STATS)
except OSError as err:
    print("no statistics cache:", err)
```

an ``accel.barrier()`` right after the save is reached by the other processes
and skipped by a main process whose save raised: the others wait for it
forever (measured: the job hung until killed). The barrier belongs where every
process goes on, after the whole ``try`` statement, and only where that is
still before the file is read again and no arm of the ``try`` leaves the block
(``barrier_after_try``). Otherwise no barrier is placed and the save is
reported.

The ``try`` is looked for around the save in its function and around each call
of that function in this file (``ModuleIndex.call_sites``): a save in
``save_stats()`` called inside a ``try`` in ``main`` skips the barrier after it
the same way. The barrier then follows the caller's ``try`` (a statement of
the caller, placed by the rule's ``leave_Try``), where each function between
the save and that ``try`` has that one call and is named nowhere else (a
second caller, or the function handed on as a value, would reach the save
with no barrier after it), and the same holds of that ``try`` as of one
around the save itself: a statement of a block every process reaches, not
inside another ``try``, no arm leaving the block, and no read of the file
inside it (the callee's reads included). Otherwise the save is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .branch_exits import leaves_block
from .file_tests import file_test
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .rule import Rule
    from .rules.torch_save import TorchSave

_TRIES = (cst.Try, cst.TryStar)
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


@dataclass(frozen=True)
class TryAround:
    """The ``try`` whose handlers catch an error of ``node``; ``caller``: it is
    around a call of ``node``'s function, not in the same function;
    ``functions``: the functions between ``node`` and the ``try`` (innermost
    first), each entered through the call that leads to the ``try``."""

    node: cst.Try | cst.TryStar
    caller: bool
    functions: tuple[cst.FunctionDef, ...] = ()


def try_around(
    index: ModuleIndex, node: cst.CSTNode, depth: int = 0
) -> TryAround | None:
    """The innermost ``try`` with an ``except`` whose body holds ``node`` in its
    function, or one around a call of that function (up to three calls deep)."""
    child = node
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, _TRIES) and child is ancestor.body:
            if ancestor.handlers:
                return TryAround(ancestor, depth > 0)
        if isinstance(ancestor, cst.FunctionDef):
            if depth >= 3:
                return None
            for site in index.call_sites(ancestor):
                found = try_around(index, site, depth + 1)
                if found is not None:
                    return TryAround(found.node, True, (ancestor, *found.functions))
            return None
        if isinstance(ancestor, _SCOPES):
            return None
        child = ancestor
    return None


def barrier_after_try(
    rule: Rule, around: TryAround, reads: list[cst.Call]
) -> str | None:
    """Why ``accel.barrier()`` cannot follow the whole ``try`` (None: it can).
    ``reads``: the loads of the saved file."""
    statement = around.node
    if around.caller:
        other = _other_use(rule, around.functions)
        if other is not None:
            return other
    if not isinstance(rule.parent(statement), (cst.IndentedBlock, cst.Module)):
        return "the `try` is not a statement of a block"
    if try_around(rule.index, statement) is not None:
        return "that `try` is inside another `try`"
    if not rule.index.uniform(statement) or file_test(rule, statement) is not None:
        return "not every process reaches that `try`"
    if leaves_block(statement):
        return (
            "an arm of that `try` leaves the block (a `return`, `break`, "
            "`continue`, `raise` or exit), so a process that takes it skips "
            "the statement after it"
        )
    inside = set(_calls_in(rule.index, statement))
    if any(read in inside for read in reads):
        return "the file is read again inside that `try`, before its end"
    return None


def _other_use(rule: Rule, functions: tuple[cst.FunctionDef, ...]) -> str | None:
    """Why a barrier after the caller's ``try`` would not follow every run of
    the save: a function between them called more than once, or named other
    than in its one call (handed on as a value). None: each has one call."""
    for function in functions:
        name = function.name.value
        sites = rule.index.call_sites(function)
        if len(sites) != 1:
            return (
                f"`{name}`, which saves, is called {len(sites)} times, not "
                "only there"
            )
        named = [
            n
            for n in findall(rule.index.module, m.Name(value=name))
            if n is not sites[0].func
            and n is not function.name
            and not _attribute_name(rule, n)
        ]
        if named:
            return (
                f"`{name}`, which saves, is also named at line "
                f"{rule.original_line(named[0])}, not only called there"
            )
    return None


def _attribute_name(rule: Rule, name: cst.CSTNode) -> bool:
    """``train`` of ``model.train()``: an attribute's name, not the function's."""
    parent = rule.index.parent(name)
    return isinstance(parent, cst.Attribute) and parent.attr is name


def _calls_in(index: ModuleIndex, node: cst.CSTNode) -> list[cst.Call]:
    """The calls ``node`` runs, those of the local functions it calls included."""
    from .index_syntax import _calls_run_by

    found: list[cst.Call] = []
    for call in _calls_run_by(node):
        found.append(call)
        found.extend(index.reached_calls.through(call))
    return found


def place_after_try(rule: TorchSave, save: cst.Call, statement: cst.CSTNode) -> bool:
    """AM010's answer for the save of a file loaded again, at ``statement``:
    False where no ``try`` catches its error; else True, with the barrier
    recorded to follow the whole ``try`` (fixed) or the save reported
    (needs-review, no barrier)."""
    from .save_calls import save_target

    around = try_around(rule.index, statement)
    if around is None:
        return False
    target = save_target(save)
    reads = rule._reads_of(target) if target is not None else []
    where = f"the `try` at line {rule.original_line(around.node)}"
    if around.caller:
        where += f" around the call of `{around.functions[-1].name.value}`"
    why_not = barrier_after_try(rule, around, reads)
    if why_not is None:
        rule._after_tests.add(around.node)
        rule.report(
            save,
            "fixed",
            f"the file is loaded again later -> accel.barrier() after {where}: "
            "its `except` catches an error of the save, which only the main "
            "process (the one that writes) can meet, so a barrier inside it "
            "would wait for a main process that skipped it; every process "
            "reaches the statement after the `try`, and no process reads the "
            "file before the main process has written it",
        )
        return True
    rule.report(
        save,
        "needs-review",
        f"the file is loaded again later, but saved inside {where}, whose "
        "`except` catches an error of the save: only the main process writes, "
        "so only it can fail there and skip accel.barrier() after the save, "
        f"which the others would wait at forever, and {why_not}; no barrier is "
        "placed (the others may read the file before the main process has "
        "written it): read the file after the `try`, or let the save's "
        "error propagate",
        if_migrated=True,
    )
    return True
