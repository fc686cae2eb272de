"""DataLoaders whose batches must not be split across processes, read from the source.

``accel.prepare_dataloader`` splits every global batch into one slice a
process. Three kinds of loader are left whole (AM006 leaves them unwrapped and
reports why, and ``unshardable_reason`` hands the reason to every rule, so no
rule treats them as sharded and nothing computed over them is combined):

- a loader whose batch size is provably 1 (``batch_size=1``, or none given,
  the DataLoader default): one sample cannot be split, so all but one process
  would get an empty batch, and a forward that cannot take zero rows
  (``net(x).argmax()`` with no dimension) crashes there;
- a loader an evaluation loop steps through whose body ranks the samples of
  each batch against each other (``metrics/batch_ranking.py``: an N-way trial
  scored by ``np.argmax(output)``, a candidate list's ``topk``): each process
  would rank only its share, and no sum of the processes' values is the
  original's;
- a loader every loop over which runs only after a test of the file system
  (``file_tests.every_call_file_test``): each process tests at its own moment,
  and one that tests after the main process has written the file skips the
  loop, so a sharded loader (whose epochs the processes start together) and a
  sum reduced after it would wait for it.

Left whole, every process reads every batch, as the original did, so what it
computes from them is the original's; a training loop over it trains every
process on the same samples, and the gradient average of equal gradients is
the original's gradient. That holds only when every process reads the batches
in the same order: a loader that may shuffle (``shuffle=`` anything but
``False``, a ``sampler=``) could draw a different order on each process once
their random states differ, so it is not left whole. One of batch size 1 is
then wrapped as before and reported (``one_sample_shuffled``): the runtime
stops it at its first batch on several processes in the default batch mode.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .names import DATALOADER_CALLS
from .subtrees import findall

if TYPE_CHECKING:
    from .analysis import ModuleIndex

_DEPTH = 4


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def unsplit_reason(index: ModuleIndex, call: cst.Call) -> str | None:
    """Why the ``DataLoader(...)`` ``call`` is left whole (unwrapped), or None."""
    if not fixed_order(call):
        return None
    if one_sample_batches(index, call):
        return (
            f"`{_code(call)}` gives one sample a batch, which cannot be split "
            "across processes (all but one would get an empty batch): it is left "
            "unwrapped, so every process reads all of it in the original's order "
            "and what is computed over it is the original's (not combined across "
            "processes; a training loop over it trains every process on the same "
            "samples). Give it a batch size of at least the number of processes "
            "and wrap it with accel.prepare_dataloader(...) to split it"
        )
    ranking = _ranking_loop(index, call)
    if ranking is not None:
        return (
            f"`{_code(ranking)}` ranks the samples of each batch of this loader "
            "against each other (a candidate list ranked for a hit rate or NDCG, "
            "an N-way trial scored by its best match): split across processes, "
            "each would rank only its share of the batch, and no combination of "
            "the processes' values is the original's. The loader is left "
            "unwrapped, so every process evaluates all of it in the original's "
            "order and its metrics are the original's (not combined across "
            "processes). To split the evaluation, score each candidate list "
            "within one sample"
        )
    test = _file_tested_loops(index, call)
    if test is not None:
        return (
            f"every loop over this loader runs only where `{_code_line(test)}` "
            "passes, a test of the file system that each process makes at its own "
            "moment (one that tests after the main process has written the file "
            "goes the other way): split across processes, the ones that skip the "
            "loop would leave the others waiting for them. The loader is left "
            "unwrapped, so every process that runs the loop reads all of it in the "
            "original's order and what it computes is the original's (not combined "
            "across processes)"
        )
    return None


def _code_line(node: cst.CSTNode) -> str:
    if isinstance(node, (cst.If, cst.While)):
        keyword = "while" if isinstance(node, cst.While) else "if"
        return f"{keyword} {_code(node.test)}"
    return _code(node).strip().splitlines()[0]


def _file_tested_loops(index: ModuleIndex, call: cst.Call) -> cst.CSTNode | None:
    """The test of the file system (``file_tests``) that decides whether each
    loop stepping through ``call`` runs, when every such loop (one at least) has
    one; None otherwise. Any test counts, also one made where the script starts:
    a loader left whole is read whole by every process, as the original did."""
    from .file_tests import every_call_file_test

    found = None
    for loop in findall(index.module, m.For()):
        assert isinstance(loop, cst.For)
        if not any(c is call for c in _loader_calls(index, loop.iter, 0)):
            continue
        test = every_call_file_test(index, loop)
        if test is None:
            return None
        found = found or test
    return found


def one_sample_shuffled(index: ModuleIndex, call: cst.Call) -> str | None:
    """The needs-review message for a ``DataLoader(...)`` of one sample a batch
    that may shuffle: it stays wrapped (see the module docstring). Also one
    whose batch size is a command-line option of default 1 (PyTorch-GAN's
    cyclegan.py: ``batch_size=opt.batch_size`` with ``--batch_size`` of
    ``default=1``): wrapped either way, it is reported for its default."""
    if fixed_order(call):
        return None
    if one_sample_batches(index, call):
        gives = "gives one sample a batch"
    else:
        option = _option_of_default_one(index, call)
        if option is None:
            return None
        gives = f"gives one sample a batch by default (`{option}` defaults to 1)"
    if _evaluated_only(index, call):
        return (
            f"`{_code(call)}` {gives} in an order it may shuffle, and the loops "
            "over it evaluate (no backward): at N processes its global batch of 1 "
            "cannot be split (all but one process would get no sample), and left "
            "whole each process could draw its own order, so it is wrapped and "
            "the runtime stops it at its first batch on more than one process "
            "(BatchSmallerThanWorldError). To run it on N processes, give this "
            "evaluation loader shuffle=False: one sample a batch in a fixed order "
            "is left whole, and every process evaluates all of it in the "
            "original's order; or launch with `accel-migrate launch --batch-mode "
            "per-device`, where each process evaluates its own sample a step (N "
            "samples a step where the original evaluated 1)"
        )
    return (
        f"`{_code(call)}` {gives} in an order it may shuffle: "
        "at N processes its global batch of 1 cannot be split (all but one "
        "process would get no sample), and left whole each process could draw "
        "its own order (the gradients averaged would be of different samples), "
        "so it is wrapped and the runtime stops it at its first batch on more "
        "than one process (BatchSmallerThanWorldError). To run it on N "
        "processes, launch with `accel-migrate launch --batch-mode per-device`: "
        "each process then draws its own sample a step, a global batch of N "
        "samples where the original trained on 1, so the losses and the trained "
        "model differ from the original's (as a batch size of N would); or give "
        "it a batch size of at least the number of processes (the global batch "
        "changes too)"
    )


def _evaluated_only(index: ModuleIndex, call: cst.Call) -> bool:
    """Is ``call`` bound to a variable (``single = DataLoader(...)``) that only
    ``for`` loops of this file step through, none of which runs a backward
    (an evaluation loader)? False where the loader goes anywhere else (a
    function it is handed to may train on it)."""
    assign = index.parent(call)
    if not (
        isinstance(assign, cst.Assign)
        and len(assign.targets) == 1
        and isinstance(assign.targets[0].target, cst.Name)
    ):
        return False
    key = index.key(assign.targets[0].target)
    if key is None:
        return False
    target = assign.targets[0].target
    loops: list[cst.For] = []
    for name in findall(index.module, m.Name(value=target.value)):
        if name is target or index.key(name) != key:
            continue
        loop = index.parent(name)
        if not (isinstance(loop, cst.For) and loop.iter is name):
            return False  # handed on, wrapped, or read otherwise
        loops.append(loop)
    return bool(loops) and not any(
        index.is_backward_call(c)
        for loop in loops
        for c in findall(loop.body, m.Call())
    )


def ranked_shuffled(index: ModuleIndex, call: cst.Call) -> str | None:
    """The needs-review message for a ``DataLoader(...)`` that may shuffle and
    whose batches a loop ranks: it stays wrapped (each process could draw its
    own order), and what the loop computes is not the original's."""
    if fixed_order(call):
        return None
    ranking = _ranking_loop(index, call)
    if ranking is None:
        return None
    return (
        f"this loader is sharded, but `{_code(ranking)}` ranks the samples of "
        "each of its batches against each other: each process ranks only its "
        "share of the batch, and no combination of the processes' values is the "
        "original's (AM009 leaves the loop unchanged). It may shuffle, so it is "
        "not left whole (each process could draw its own order): evaluate with a "
        "DataLoader in a fixed order (shuffle=False), which the migration leaves "
        "whole, or score each candidate list within one sample"
    )


def _option_of_default_one(index: ModuleIndex, call: cst.Call) -> str | None:
    """The command-line option (``--batch_size``) whose value ``call``'s batch
    size reads (``opt.batch_size``, ``args.batch_size``), when this file's
    ``add_argument`` of it has ``default=1``; None otherwise."""
    from .batches import batch_size_of
    from .patterns import string_value

    size = batch_size_of(index, call)
    if not (isinstance(size, cst.Attribute) and isinstance(size.value, cst.Name)):
        return None
    wanted = size.attr.value
    found: list[str] = []
    for node in index.calls:
        if not (
            isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "add_argument"
            and node.args
        ):
            continue
        flags = [string_value(a.value) or "" for a in node.args if a.keyword is None]
        if not flags or not all(f.startswith("-") for f in flags):
            continue
        # argparse's dest: the first long option (`-b`, `--batch-size`)
        flag = next((f for f in flags if f.startswith("--")), flags[0])
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword}
        dest = string_value(keywords["dest"]) if "dest" in keywords else None
        if (dest or flag.lstrip("-").replace("-", "_")) != wanted:
            continue
        default = keywords.get("default")
        if default is None or not m.matches(default, m.Integer("1")):
            return None
        found.append(flag)
    return found[0] if len(found) == 1 else None


def one_sample_batches(index: ModuleIndex, call: cst.Call) -> bool:
    """``batch_size=1``, or no batch size at all (the default, 1)."""
    from .batches import batch_size_of

    if any(a.star for a in call.args if a.star == "*"):
        return False
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    if "batch_sampler" in keywords:
        return False
    size = batch_size_of(index, call)
    if size is None:
        return not any(a.star == "**" for a in call.args)
    return m.matches(size, m.Integer("1"))


def fixed_order(call: cst.Call) -> bool:
    """The loader yields its samples in one fixed order: no ``shuffle=`` but
    ``False``, no ``sampler=`` but ``None`` (HiFi-GAN's validation loader
    spells ``sampler=None``), nothing passed by ``*`` or ``**``."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if any(a.star for a in call.args) or len(positional) > 3:
        return False
    shuffle = positional[2].value if len(positional) == 3 else None
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value in ("sampler", "batch_sampler") and not m.matches(
                arg.value, m.Name("None")
            ):
                return False
            if arg.keyword.value == "shuffle":
                shuffle = arg.value
    return shuffle is None or m.matches(shuffle, m.Name("False"))


def _ranking_loop(index: ModuleIndex, call: cst.Call) -> cst.Call | None:
    """A ranking of the batch's samples in a loop that steps through ``call``."""
    from .metrics.batch_ranking import batch_ranking

    def over_loader(iterable: cst.BaseExpression) -> bool:
        return bool(_loader_calls(index, iterable, 0))

    for loop in findall(index.module, m.For()):
        assert isinstance(loop, cst.For)
        if any(c is call for c in _loader_calls(index, loop.iter, 0)):
            found = batch_ranking(index, loop, over_loader)
            if found is not None:
                return found
    return None


def _loader_calls(
    index: ModuleIndex, expr: cst.BaseExpression, depth: int
) -> list[cst.Call]:
    """The ``DataLoader(...)`` calls ``expr`` may be (through ``enumerate``,
    ``tqdm``, variables and the arguments of a local function's calls). Read
    without the index's loader facts, which are built from this module's
    answers."""
    from .batches import possible_values

    if depth > _DEPTH:
        return []
    inner = index._loop_wrapped(expr)  # type: ignore[attr-defined]
    if inner is not None:
        return _loader_calls(index, inner, depth + 1)
    if isinstance(expr, cst.Call):
        return [expr] if index.qualnames(expr.func) & DATALOADER_CALLS else []
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return []
    found: list[cst.Call] = []
    for value in possible_values(index, expr) or ():
        if value is not None:
            found += _loader_calls(index, value, depth + 1)
    return found
