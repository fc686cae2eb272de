"""Calls into a local module's helper that writes files or prints (AM017's part
of the project view): ``save_checkpoint(state, is_best)`` from ``utils.py``,
``Logger("log.txt")``, ``progress_bar(i, n, msg)``.

The helper's module is not rewritten (it is a library of the script, read but
never written with one file argument, and not a training entry point in a
batch), so the call is moved instead: ``accel.on_main_process(save_checkpoint,
state, is_best)``, followed by ``accel.barrier()`` when the helper writes files
(any process may read them once it returns). That is safe only where all the helper does is write and
print (``HelperFact.effects_only``: nothing handed back, nothing of its
arguments or of the module changed, no collective). Otherwise the call is left
as it is, with a needs-review finding that names the helper and its file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

from .file_tests import file_test, file_test_note
from .instance_reads import instance_leaves, instance_value_read
from .project_facts import HelperFact
from .subtrees import findall
from .trained_models import snippet

if TYPE_CHECKING:
    from .analysis import ModuleIndex
    from .rules.main_process_writes import MainProcessWrites


def helper_call(
    rule: MainProcessWrites, original: cst.Call, updated: cst.Call, helper: HelperFact
) -> cst.BaseExpression:
    used = not isinstance(rule.parent(original), cst.Expr)
    if helper.batch_migrated:
        # Its own file is migrated in this batch, where its prints and writes are
        # made main-process ones; a finding there that leaves it whole leaves
        # this file whole too (AM103, cli/project.py), so the call stays as it is.
        return updated
    if helper.batch_library:
        return _left_to_its_file(rule, original, updated, helper)
    if helper.uncalled_effects:
        # LSTNet's `Optim.Optim(...)`: only `updateLearningRate` prints, and
        # nothing in the project names it (``uncalled_methods``)
        methods = ", ".join(f"`{m}`" for m in helper.uncalled_effects)
        rule.report(
            original,
            "info",
            f"{helper.describe()} only in {methods}, which nothing in this "
            "project calls: building one runs none of them, so the call is left "
            "as it is; if you call one, guard its writes and prints in "
            f"{helper.file} with accel.is_main_process()",
        )
        return updated
    if helper.collectives and not helper.collective_calls:
        # utils.save_on_master: `if is_main_process(): torch.save(...)` over
        # dist.get_rank(); its own test, not read here, chooses who writes
        rule.report(
            original,
            "needs-review",
            f"{helper.describe()}: which processes write and print is then its "
            "own test of the rank, which this rule does not read, so it is left "
            "to run on every process as it is; check in "
            f"{helper.file} that its writes and prints are under such a test "
            "(accel.is_main_process())",
            if_migrated=True,
        )
        return updated
    if helper.collectives:
        rule.report(
            original,
            "needs-review",
            f"{helper.describe()}: on every process its writes race and its output "
            "is repeated, and on the main process alone its collectives would wait "
            f"for the others forever; guard its writes in {helper.file} with "
            "accel.is_main_process()",
            if_migrated=True,
        )
        return updated
    read = instance_value_read(rule.index, original) if helper.kind == "class" else ""
    left = instance_leaves(rule.index, original) if helper.kind == "class" else ""
    stays = read or left or not helper.effects_only
    if stays and helper.method_effects:
        # GLUE's `BertConfig(...)`: the object stays on every process (it is
        # handed to the model), only `to_json_file` writes, and the script calls
        # it (`model_to_save.config.to_json_file(path)`): reported there. An
        # object that can be the main process's alone (ImageNet's
        # `ProgressMeter`, only its `display` called) is made so below.
        sites = _effect_method_calls(rule, helper)
        if sites:
            _report_effect_method_calls(rule, original, helper, sites)
            return updated
    if read:
        # ConvLSTM-PyTorch's `if early_stopping.early_stop: break`: the stand-in
        # of the other processes would answer it (true), not the object
        rule.report(
            original,
            "needs-review",
            f"{helper.describe()}, and the script reads {read} off the object: "
            "made on the main process only, the other processes would read a "
            "stand-in there (true, whatever the object holds) and take other "
            "branches, so it is left to run on every process (racing writes, "
            f"repeated output); guard its writes in {helper.file} with "
            "accel.is_main_process()",
            if_migrated=True,
        )
        return updated
    if left:
        # the ConvLSTM stopper handed to `fit(..., early_stopping)`, which tests
        # `stopper.early_stop`, or stored on `self` and read there
        rule.report(
            original,
            "needs-review",
            f"{helper.describe()}, and the object leaves its name ({left}), where "
            "this rule does not follow what is read off it: made on the main "
            "process only, the other processes would read a stand-in there (true, "
            "whatever the object holds) and could take other branches, so it is "
            "left to run on every process (racing writes, repeated output); guard "
            f"its writes in {helper.file} with accel.is_main_process()",
            if_migrated=True,
        )
        return updated
    if not helper.effects_only or (used and helper.kind == "function"):
        rule.report(
            original,
            "needs-review",
            f"{helper.describe()}, on every process (racing writes, repeated "
            "output); it cannot be shown to do nothing else (hand back or change "
            "a value, call code the analysis does not know), so it is not moved "
            f"to the main process; guard its writes in {helper.file} with "
            "accel.is_main_process()",
            if_migrated=True,
        )
        return updated
    if (
        helper.writes
        and _makes_folders_only(helper)
        and _barrier_can_follow(rule, original)
    ):
        # a folder made on the main process, which the others may write into
        # once it returns (torchdiffeq's `makedirs(args.save)`, then
        # `get_logger(logpath=os.path.join(args.save, "logs"))` opening a
        # logging.FileHandler there on every process)
        rule.barrier_after(original)
        rule.report(
            original,
            "fixed",
            f"{helper.describe()}, and nothing else -> accel.on_main_process(...), "
            "then accel.barrier(), so that no process writes into the folder before "
            "the main process has made it",
        )
    elif not helper.writes or _makes_folders_only(helper):
        # a folder made on the main process where no barrier can follow
        rule.report(
            original,
            "fixed",
            f"{helper.describe()}, and nothing else -> accel.on_main_process(...)",
        )
    elif _barrier_can_follow(rule, original):
        # what it writes may be read back by any process once it returns
        # (``utils.load_best()`` after ``save_checkpoint(state, is_best)``)
        rule.barrier_after(original)
        rule.report(
            original,
            "fixed",
            f"{helper.describe()}, and nothing else -> accel.on_main_process(...), "
            "then accel.barrier(), so that no process reads what it writes before "
            "the main process has written it",
        )
    else:
        rule.report(
            original,
            "needs-review",
            f"{helper.describe()}, and nothing else: moved to the main process "
            "(accel.on_main_process), but this call is not a statement that every "
            "process reaches together, so no barrier can follow it: a process may "
            "read what it writes before the main process has written it; call it "
            "where every process passes, then accel.barrier()"
            + file_test_reason(rule, original),
            if_migrated=True,
        )
    return rule.on_main_process(updated)


def _barrier_can_follow(rule: MainProcessWrites, call: cst.Call) -> bool:
    """Is ``call`` a statement of its own (``f(...)``, ``x = f(...)``) that every
    process reaches together, so that ``accel.barrier()`` may follow it? Not
    under a test of the file system (``if not os.path.isdir(d):``), here or
    around a call of the function it is in (``file_tests``): what each process
    finds there depends on what the main process has written yet."""
    return (
        _own_statement(rule, call)
        and rule.index.uniform(call)
        and file_test(rule, call) is None
    )


def _own_statement(rule: MainProcessWrites, call: cst.Call) -> bool:
    """Is ``call`` a statement of its own (``f(...)``, ``x = f(...)``)?"""
    statement = rule.parent(rule.parent(call))
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and rule.parent(call) is statement.body[0]
        and isinstance(statement.body[0], (cst.Expr, cst.Assign))
    )


def file_test_reason(rule: MainProcessWrites, call: cst.Call) -> str:
    """Why no barrier can follow ``call`` where a test of the file system decides
    whether it runs (``file_tests``), for a finding; empty otherwise."""
    test = file_test(rule, call)
    return "" if test is None else f" ({file_test_note(rule, test)})"


def _makes_folders_only(helper: HelperFact) -> bool:
    return all(w in ("os.makedirs", "os.mkdir") for w in helper.writes)


def _effect_method_calls(rule: MainProcessWrites, helper: HelperFact) -> list[cst.Call]:
    """The calls of this module whose method is named as one of ``helper``'s
    methods that write or print (``HelperFact.method_effects``)."""
    names = m.OneOf(*(m.Name(n) for n in helper.method_effects))
    return [
        node
        for node in findall(rule.index.module, m.Call(func=m.Attribute(attr=names)))
        if isinstance(node, cst.Call)
    ]


def _report_effect_method_calls(
    rule: MainProcessWrites,
    original: cst.Call,
    helper: HelperFact,
    sites: list[cst.Call],
) -> None:
    """Building ``helper``'s class writes nothing: report the calls of its
    writing methods (once each), where the writes run, and say so at the
    construction."""
    # (instance_writes imports this module)
    from .instance_writes import method_writes, writing_instance

    done: set[int] = rule.__dict__.setdefault("_effect_sites", set())
    writes = dict(helper.method_writes)
    for site in sites:
        if id(site) in done:
            continue
        if method_writes(rule, site) or writing_instance(rule, site):
            # `config.to_json_file(path)` on an instance the analysis follows:
            # reported (or fenced) at that call by its own part of AM017
            continue
        done.add(id(site))
        name = site.func.attr.value  # type: ignore[attr-defined]
        what = (
            f"writes files ({', '.join(writes[name])})"
            if name in writes
            else "writes or prints"
        )
        rule.report(
            site,
            "needs-review",
            f"`{snippet(site)}` calls `{name}`, the name of a method of "
            f"`{helper.name}` in {helper.file} that {what}, on every process "
            "(racing writes, repeated output); the method is the project's and "
            "may read or hand back state, so the call is not moved to the main "
            "process; run it under `if accel.is_main_process():` or guard its "
            f"writes in {helper.file} with accel.is_main_process()",
            if_migrated=True,
        )
    methods = ", ".join(f"`{n}`" for n in helper.method_effects)
    lines = ", ".join(str(rule.original_line(site)) for site in sites)
    rule.report(
        original,
        "info",
        f"{helper.describe()} only in {methods}; building one runs none of them, "
        f"so the call is left as it is, and the calls of them are reported where "
        f"they run (line {lines})",
    )


def _left_to_its_file(
    rule: MainProcessWrites, original: cst.Call, updated: cst.Call, helper: HelperFact
) -> cst.BaseExpression:
    """A helper whose file makes its own writes and prints main-process ones
    (``HelperFact.batch_library``) runs on every process as written. What it
    writes may be read back by any process once it returns (``latest(folder)``,
    a log read at the end), so where every process calls it together a barrier
    follows the call; where only some do, it is reported."""
    if not helper.writes:
        rule.report(
            original,
            "fixed",
            f"{helper.describe()}: its prints are made main-process ones in "
            f"{helper.file}, migrated with this batch; the call stays on every process",
        )
        return updated
    if not _barrier_can_follow(rule, original):
        rule.report(
            original,
            "needs-review",
            f"{helper.describe()}: its writes are made main-process ones in "
            f"{helper.file}, migrated with this batch, but this call is not a "
            "statement that every process reaches together, so no barrier can "
            "follow it: a process may read what it writes before the main process "
            "has written it; call it where every process passes, then accel.barrier()"
            + file_test_reason(rule, original),
            if_migrated=True,
        )
        return updated
    rule.barrier_after(original)
    rule.report(
        original,
        "fixed",
        f"{helper.describe()}: its writes are made main-process ones in "
        f"{helper.file}, migrated with this batch -> accel.barrier() after the "
        "call, so that no process reads what it writes before the main process "
        "has written it",
    )
    return updated


def loader_passed_to_helper(index: ModuleIndex, call: cst.Call) -> str | None:
    """Why passing a sharded loader to a local module's helper needs review
    (``utils.evaluate(net, test_loader)``): what the helper sums or logs over it
    is this process's share, and its module is not rewritten."""
    helper = index.helper(call.func)
    if helper is None or helper.returns == "loader":
        return None
    positional = [a for a in call.args if a.keyword is None]
    for arg in call.args:
        key = index.key(arg.value)
        if (
            key is not None
            and key in index.loaders
            and (helper.batch_migrated or _handed(helper, arg, positional))
        ):
            # What it sums over the loader is reduced in its own file, which
            # knows the loader from its callers (project_callers); a finding
            # there that leaves that file whole leaves this one whole too (AM103).
            return None
        if key is not None and key in index.loaders and helper.ranks_batch:
            return (
                f"`{key[1]}` is sharded (each process reads its share) and is passed "
                f"to {helper.where}, which ranks the samples of each batch against "
                f"each other ({helper.ranks_batch}): each process would rank only "
                "its share of the batch, so what it computes from the ranking (a "
                "hit rate, an NDCG) differs from the original's and no reduction "
                "gives it back; evaluate with a loader that is not sharded (on the "
                "main process), or score each candidate list within one sample"
            )
        if key is not None and key in index.loaders:
            return (
                f"`{key[1]}` is sharded (each process reads its share) and is passed "
                f"to {helper.where}, which is not rewritten: sums, counts and logs "
                "it makes over the loader are this process's only; reduce them "
                "there with accel.reduce"
            )
    return None


def _handed(helper: HelperFact, arg: cst.Arg, positional: list[cst.Arg]) -> bool:
    """Does ``arg`` bind a parameter that the helper's migrated module reduces
    over (``HelperFact.handed_loaders``)?"""
    if arg.star:
        return False
    if arg.keyword is not None:
        return any(arg.keyword.value == name for name, _ in helper.handed_loaders)
    place = next(i for i, a in enumerate(positional) if a is arg)
    if any(a.star for a in positional[:place]):
        return False  # after `*args`: its parameter is not known
    return any(at == place for _, at in helper.handed_loaders)


def optimizer_method(index: ModuleIndex, call: cst.Call) -> HelperFact | None:
    """The model class of a local module whose method ``call`` runs, when that
    method hands back an optimizer over the model's own parameters
    (``model.configure_optimizers(config)`` with ``model = GPT(config)`` and
    ``GPT`` in mingpt/model.py): every value of the receiver is an instance."""
    return model_method(index, call, lambda fact: fact.optimizer_methods)


def model_method(
    index: ModuleIndex,
    call: cst.Call,
    methods: Callable[[HelperFact], tuple[str, ...]],
) -> HelperFact | None:
    """The model class of a local module whose method ``call`` runs, when that
    method is one of ``methods(fact)`` (``HelperFact.optimizer_methods``,
    ``param_group_methods``): every value of the receiver is an instance."""

    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    key = index.key(func.value)
    values = index.values.get(key, []) if key is not None else []
    if not values or not all(
        isinstance(_constructed(index, v), cst.Call) for v in values
    ):
        # `model, config = self.model, self.config` with `self.model` handed in
        # by every call of the batch's other files: the class they show
        # (``project_callers``), traced as a called model is
        from .reduction.model_classes import model_class_of

        fact = model_class_of(index, func.value) if index.project.callers else None
        if fact is None or func.attr.value not in methods(fact):
            return None
        return fact
    found = None
    for value in values:
        value = _constructed(index, value)
        if not isinstance(value, cst.Call):
            return None
        fact = index.helper(value.func, "model")
        if fact is None or func.attr.value not in methods(fact):
            return None
        found = fact
    return found


def _constructed(
    index: ModuleIndex, value: cst.BaseExpression | None
) -> cst.BaseExpression | None:
    """``GPT(cfg)`` of ``accel.prepare_model(GPT(cfg).to(device))``."""
    from .analysis import method_call

    while value is not None:
        inner = method_call(value, "to", "cuda")
        if inner is not None:
            value = inner.value
        elif index.is_runtime_call(value, "prepare_model") and value.args:  # type: ignore[attr-defined]
            value = value.args[0].value  # type: ignore[attr-defined]
        else:
            return value
    return None
