"""How a finding says why a value differs between processes, and how to make
it the same: the words for a ``rank_local_sources.Source`` (AM028)."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from .rank_local_sources import Source

#: Said where no source is found (the analysis errs towards rank-dependent).
GENERIC_WHY = (
    "it is computed, or set under a condition that is, from this process's share "
    "of the data, its clock or its random draws"
)
GENERIC_FIX = (
    "make the value global where it is computed (accel.reduce of its sums and "
    "counts, accel.global_loss for a loss)"
)
_FIXES = {
    "data": (
        "make the value global where it is computed (accel.reduce of its sums "
        "and counts, accel.global_loss for a loss; for samples it keeps, "
        "accel.gather of the rows before they are tested, so that every process "
        "tests all of them)"
    ),
    "clock": (
        "decide on values every process shares, not on each process's clock (a "
        "step or epoch count for a time budget; a name passed on the command "
        "line, or fixed in the script, for a folder or file)"
    ),
    "pid": "compute it from values every process shares, not from the process id",
    "environment": (
        "leave the choice of a process to the runtime (accel.is_main_process() "
        "for work one process does, collectives outside it), not a branch on the "
        "launcher's rank variables"
    ),
    "random": (
        "draw it from a generator seeded alike on every process "
        "(generator=torch.Generator().manual_seed(seed)), or decide on values "
        "every process shares"
    ),
    "exception": (
        "make the `try` succeed or fail alike on every process (read a path "
        "every process shares), or decide on values every process shares"
    ),
}


def why(source: Source | None, line_of: Callable[[cst.CSTNode], int]) -> str:
    """``start_epoch` is computed (through `checkpoint`, `exp_dir`, `timestr`)
    from `datetime.datetime.now()` at line 95: each process reads its own
    clock...``."""
    if source is None:
        return GENERIC_WHY
    line = line_of(source.node)
    text = _code(source.node)
    # a rank-local option's flag: `args.local_rank` is read from its default
    names = [
        f"the default of `{n}`" if n.startswith("-") else f"`{n}`"
        # a caller's `rank` handed to a parameter `rank` is said once
        for n in dict.fromkeys(source.through)
    ]
    if source.kind == "exception":
        who = names[-1] if names else "it"
        return (
            f"{who} is set in the `except` handler at line {line}, and the `try` "
            "before it can fail on some processes and not on others"
        )
    via = "it is computed"
    if names:
        via = f"{names[0]} is computed"
        if len(names) > 1:
            via += " (through " + ", ".join(names[1:]) + ")"
    if source.kind == "clock":
        return (
            f"{via} from `{text}` at line {line}: each process reads its own "
            "clock, so what is named or decided from it (a folder, a file, a time "
            "budget) differs between processes"
        )
    if source.kind == "pid":
        return f"{via} from `{text}` at line {line}, this process's own id"
    if asks_group(source):
        return (
            f"{via} from `{text}` at line {line}, this process's rank in the "
            "process group the migrated script's runtime starts"
        )
    if source.kind == "environment":
        # a namespace parsed in another file of the batch (`project_namespaces`)
        where = source.origin or f"`{text}` at line {line}"
        return (
            f"{via} from {where}, a variable the launcher sets "
            "differently for each process"
        )
    if source.kind == "random":
        return (
            f"{via} from the random draw `{text}` at line {line}, which each "
            "process draws on its own"
        )
    return (
        f"{via} from this process's share of the data (`{text}` at line {line}), "
        "so it covers this process's samples only: it differs from the original's "
        "value, and between processes where their shares differ"
    )


_GROUP_FIX = (
    "leave the choice of a process to the runtime (accel.is_main_process() "
    "for work one process does, collectives outside it), not a branch on "
    "torch.distributed's rank"
)

_NUMPY_DRAW = (
    "draw it from a generator seeded alike on every process "
    "(rng = np.random.default_rng(seed), and the draw made from rng), or decide on "
    "values every process shares"
)


def asks_group(source: Source | None) -> bool:
    """Is ``source`` a query of the process group's rank (``dist.get_rank()``),
    not one of the launcher's rank variables?"""
    return (
        source is not None
        and source.kind == "environment"
        and _code(source.node).endswith("get_rank()")
    )


def fix(source: Source | None) -> str:
    if source is None:
        return GENERIC_FIX
    if asks_group(source):
        return _GROUP_FIX
    if source.kind == "random" and _code(source.node).startswith(("np.", "numpy.")):
        return _NUMPY_DRAW  # a torch.Generator does not seed numpy's draws
    return _FIXES[source.kind]


def _code(node: cst.CSTNode) -> str:
    if isinstance(node, cst.ExceptHandler):
        return "except"
    text = cst.Module([]).code_for_node(node).strip()
    return text if len(text) <= 50 else text[:47] + "..."


#: The hazards AM028 (``rank_local_decisions``) names: what a decision on a
#: rank-local value changes between processes.
EXIT = "an early exit: ranks can stop at different epochs (or steps) and hang in the next collective"
SKIP = (
    "a skipped step (`continue`): the processes can skip different steps, so one "
    "process's gradient exchange meets another's next step (wrong gradients) or "
    "waits for a step that never comes (a hang)"
)
LEARNING_RATE = "the learning rate: the processes' learning rates can diverge and their model replicas drift apart"
CHECKPOINT = (
    "which checkpoint is saved: the main process chooses on its own value, "
    "not on the original's (and under FSDP the state dict is gathered by a "
    "collective that only some processes reach)"
)
#: Who takes a branch on a rank: a launcher's variable, or the process group's.
VARIABLE_TAKERS = (
    "only those whose rank variable passes the test take {branch} (one per machine "
    "where the variable is a local rank)"
)
GROUP_TAKERS = (
    "only those whose rank in the process group passes the test take {branch}"
)
RANK_BRANCH = (
    "which processes save the checkpoint: {takers}, so a collective under it "
    "(the state dict gathered under FSDP, a barrier) waits for processes that "
    "never come (a hang)"
)
SAMPLE_FILES = (
    "which sample files are written: the main process writes the files its own "
    "values pass, not the original's, so a file the original wrote can be "
    "missing and one it did not write can appear"
)
STATE_DICT = (
    "whether `accel.state_dict` runs: under FSDP it is a collective every "
    "process must call, and the processes that call it wait for those that do "
    "not (a hang); call it above the branch (`state = accel.state_dict(model)` "
    "on every process) and save `state` under it"
)
MODEL_READ = (
    "whether the branch reads `{read}`, a prepared model's parameters (or runs "
    "the model): under FSDP they are sharded, so the read gathers them by a "
    "collective that the processes not taking the branch never join (a hang); "
    "read the value on every process above the branch and use it under the branch"
)
COLLECTIVE = "whether a training, evaluation or collective step runs: the processes that run it wait for those that do not (a hang)"
LOSS_TERM = (
    "which terms the backpropagated loss has: the processes that add a term give "
    "gradients to parameters that the others leave without one, so DDP's gradient "
    "exchange aborts or hangs, and each process decides on its own share, not on "
    "the original's batch"
)

#: The end of a named collective's hazard (``rank_local_decisions._named_collective``).
NAMED_END = ", and the processes that run it wait for those that do not (a hang)"
