"""Calls of a method of an instance of a class that a training file of this
batch defines and that writes files (AM017's part of the project view):
PyTorch-BYOL's ``trainer.train(train_dataset)`` in main.py, where
``BYOLTrainer.train`` (trainer.py, migrated in the same batch) ends with
``self.save_model(path)``, and main.py then ``torch.load``s that checkpoint
for the linear evaluation.

The class's file makes its writes main-process ones (``accel.save``). The
method runs on every process, and returns on the others before the main
process has written: a process that reads the file afterwards (the caller, or
anything after it) may find it missing or half old. Where every process
reaches the call together, ``accel.barrier()`` follows it; where only some do,
no barrier can, and it is reported. A call read inside an expression
(``print(trainer.evaluate(loader))``) is left alone, and so is a call of a
method that writes nothing (``method_writes.quiet_methods``: TD3's
``select_action``).

A class of a local module that is not migrated (a model class in model.py)
whose method writes files itself (word2vec's ``model.save_embedding(id2word,
path)``, an ``open(path, "w")`` in the method) runs that write on every
process: the same file written N times at once. The rule cannot move the call
to the main process: the method is the project's, may read state that differs
by process or that FSDP shards (the parameters), and may hand something back.
It is reported (``HelperFact.method_writes``), naming the method and what it
writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from .helper_effects import (
    _barrier_can_follow,
    _makes_folders_only,
    _own_statement,
    file_test_reason,
)
from .imported_draws import instance_facts

if TYPE_CHECKING:
    from .project_facts import HelperFact
    from .rules.main_process_writes import MainProcessWrites


def writing_instance(rule: MainProcessWrites, call: cst.Call) -> HelperFact | None:
    """The class of another training file of the batch whose instance ``call``
    calls a method of (``trainer.train(...)``), when that class writes files
    other than folders; None otherwise."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    facts = instance_facts(rule.index, func.value)
    return next(
        (
            fact
            for fact in sorted(facts, key=lambda f: f.where)
            if fact.kind == "class"
            and fact.batch_migrated
            and fact.writes
            and not _makes_folders_only(fact)
        ),
        None,
    )


def instance_call(rule: MainProcessWrites, call: cst.Call, fact: HelperFact) -> None:
    """Follow ``call`` with accel.barrier() where every process reaches it
    together; report it where not."""
    method = call.func.attr.value  # type: ignore[attr-defined]
    if method in fact.quiet_methods:
        # `policy.select_action(state)`: a method that writes nothing, while
        # the class's `save` does (``method_writes``)
        return
    what = (
        f"`{fact.name}.{method}` runs on every process, and {fact.where} writes "
        f"files ({', '.join(fact.writes)}) on the main process only once migrated "
        "with this batch"
    )
    if not _own_statement(rule, call):
        # a value read inside an expression (`print(trainer.evaluate(loader))`):
        # the class's writes are in other methods as often as not, and no
        # method's own writes are known here; left as it is
        return
    if not _barrier_can_follow(rule, call):
        rule.report(
            call,
            "needs-review",
            f"{what}, but this call is not a statement that every process reaches "
            "together, so no barrier can follow it: a process may read what it "
            "writes before the main process has written it; call it where every "
            "process passes, then accel.barrier()" + file_test_reason(rule, call),
            if_migrated=True,
        )
        return
    rule.barrier_after(call)
    rule.report(
        call,
        "fixed",
        f"{what} -> accel.barrier() after the call, so that no process reads what "
        "it writes before the main process has written it",
    )


def method_writes(
    rule: MainProcessWrites, call: cst.Call
) -> tuple[HelperFact, str, tuple[str, ...]] | None:
    """(class, method, what it writes) for ``obj.method(...)`` where ``obj`` holds
    an instance of a class of a local module that this batch does not migrate
    and ``method`` writes files itself (``HelperFact.method_writes``); None
    otherwise."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    method = func.attr.value
    for fact in sorted(instance_facts(rule.index, func.value), key=lambda f: f.where):
        if fact.kind != "class" or fact.batch_migrated:
            continue
        writes = dict(fact.method_writes).get(method, ())
        writes = tuple(w for w in writes if w not in ("os.makedirs", "os.mkdir"))
        if writes:
            return fact, method, writes
    return None


def report_method_writes(
    rule: MainProcessWrites,
    call: cst.Call,
    found: tuple[HelperFact, str, tuple[str, ...]],
) -> None:
    fact, method, writes = found
    # Every process writes the same bytes at once; with a barrier on each side
    # none reads the file while another still writes it (CosFace_pytorch's
    # `model.module.save(path)` then `lfw_eval.eval(path)`, in the epoch loop:
    # the barrier before keeps the next epoch's writes from the last one's reads)
    fenced = _barrier_can_follow(rule, call)
    if fenced:
        rule.barrier_around(call)
    rule.report(
        call,
        "needs-review",
        f"`{fact.name}.{method}` in {fact.file} writes files ({', '.join(writes)}) "
        "and runs on every process: each writes the same file at once (racing, "
        "truncated or interleaved writes); the rule cannot move a method of the "
        "project to the main process (it may read what differs by process, or "
        "parameters that FSDP shards)"
        + (
            "; accel.barrier() before and after the call keeps every process from "
            "reading the file while another writes it; "
            if fenced
            else "; "
        )
        + "call it under `if accel.is_main_process():` "
        "(with the full parameters, accel.state_dict(model), under FSDP), then "
        "accel.barrier() before any process reads the file",
        if_migrated=True,
    )
