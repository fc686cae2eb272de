"""Where the migrated script starts its process group: before a module-level
statement, or not yet (AM046's question about a world size read there).

The runtime starts the process group lazily, at its first call that needs the
runtime (``accel.device()``, ``accel.prepare_model(...)``...); ``accel.rank()``,
``accel.world_size()``, ``accel.is_main_process()`` and ``accel.print`` read the
launcher's variables and start nothing. A script with no device code gets
``accel.device(accelerator=False)`` right after its imports (``device_free``),
which starts it there. Before that, deit's ``utils.get_world_size()`` (1 where
no group is initialised) still answers 1 in the migrated run, as in the
original: measured, a module-level ``lr * utils.get_world_size()`` above
``device = accel.device()`` printed the original's value at world 2, and the
same call after the loop gave 2.

``started_before(rule, node)`` answers for a node of a module-level statement
(its function: None): the first module-level statement, up to the one holding
it, that runs a runtime call starting the group (in its own text or in a local
function it calls, ``reached_calls``), or a helper of a local module that
calls the runtime or torch.distributed (``HelperFact.collectives``) and asks
nothing of the group (a helper that asks, ``group_queries``, is taken for a
query, not for one that starts it: an assumption); ``"imports"``
where the device-free call follows the imports; None where nothing before it
can start the group. A node inside a function is not answered (its function
may run at any time): ``"function"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .device_free import device_free
from .index_syntax import _calls_run_by

if TYPE_CHECKING:
    from .rule import Rule

#: Runtime calls that read the launcher's variables and start nothing.
_NOT_STARTING = frozenset(
    {
        "rank",
        "local_rank",
        "world_size",
        "is_main_process",
        "is_local_main_process",
        "print",
    }
)


def started_before(rule: Rule, node: cst.CSTNode) -> cst.CSTNode | str | None:
    """The statement that starts the process group before ``node`` runs (see
    the module's docstring), ``"imports"``, ``"function"``, or None."""
    index = rule.index
    if index.enclosing_function(node) is not None or index.enclosing_class(node):
        return "function"
    project = index.project
    if not (project.callers or project.library_for) and device_free(
        rule.context.original_code, project
    ):
        return "imports"
    holder = next(
        (a for a in (node, *index.ancestors(node)) if index.parent(a) is index.module),
        None,
    )
    if holder is None:
        return "function"
    for statement in index.module.body:
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)) and _starts(
            rule, statement
        ):
            return statement
        if statement is holder:
            return None
    return None


def _starts(rule: Rule, statement: cst.CSTNode) -> bool:
    index = rule.index
    for call in _calls_run_by(statement):
        for reached in (call, *index.reached_calls.through(call)):
            if _starting_call(rule, reached):
                return True
        helper = index.helper(call.func)
        # a helper that asks the group (deit's `utils.get_world_size()`) is
        # taken for a query, not for one that starts it
        if helper is not None and helper.collectives and not helper.group_queries:
            return True
    return False


def _starting_call(rule: Rule, call: cst.Call) -> bool:
    names = rule.qualnames(call.func)
    if any(n.startswith("torch.distributed.") for n in names):
        return "torch.distributed.is_initialized" not in names and not any(
            n.endswith((".is_available", ".get_world_size", ".get_rank")) for n in names
        )
    chain = cst.Module([]).code_for_node(call.func)
    prefix = rule.context.alias + "."
    runtime = chain.startswith(prefix) or any(
        n.startswith("accel_migrate.runtime.") for n in names
    )
    if not runtime:
        return False
    name = (
        chain[len(prefix) :] if chain.startswith(prefix) else chain.rsplit(".", 1)[-1]
    )
    return name not in _NOT_STARTING
