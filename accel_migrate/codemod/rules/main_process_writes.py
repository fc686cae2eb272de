"""AM017 main-process-writes: loggers and files the script writes exist on the main process only.

## What
Wraps what writes experiment logs and output files in
``accel.on_main_process(...)``, which makes the object on the main process and a
stand-in that accepts every call (and ``with``) and does nothing on the others:

- TensorBoard writers: ``SummaryWriter(...)`` (``torch.utils.tensorboard`` and
  ``tensorboardX``) becomes ``accel.on_main_process(SummaryWriter, ...)``;
- wandb and MLflow calls that create or write a run (``wandb.init``,
  ``wandb.log``, ``wandb.finish``, ``wandb.watch``, ``mlflow.log_metric``, ...):
  ``wandb.log({...}, step=step)`` becomes
  ``accel.on_main_process(wandb.log, {...}, step=step)``;
- files opened for writing, ``open(path, "w")`` (modes with ``w``, ``a``, ``x`` or
  ``+``, also in ``with``): ``accel.on_main_process(open, path, "w")``;
- functions that write a file by its path: ``torchvision.utils.save_image``,
  ``numpy.save`` / ``savez`` / ``savez_compressed`` / ``savetxt`` and
  ``matplotlib.pyplot.savefig``; and the ``ndarray`` methods ``dump`` and
  ``tofile`` on a value known to be a NumPy array (a variable only ever bound
  to ``np.zeros(...)``, ``np.array(...)``, ...: ``all_loss.dump(path)``);
- calls that copy, move or remove files: ``shutil.copyfile`` / ``copy`` /
  ``copy2`` / ``copytree`` / ``move`` / ``rmtree``, ``os.remove`` / ``unlink`` /
  ``rmdir`` / ``removedirs`` / ``rename`` / ``renames`` / ``replace``, and the
  ``pathlib.Path`` methods ``write_text``, ``write_bytes``, ``rename``,
  ``replace``, ``unlink`` and ``rmdir`` (on a value known to be a ``Path``).
  Wherever they are: at module level, in a loop, or in a helper function the
  training code calls (``save_checkpoint``).
- calls of a local module's helper that writes files or prints
  (``utils.save_checkpoint(...)``, ``Logger("log.txt")``, a progress bar), known
  from the project view: ``accel.on_main_process(save_checkpoint, ...)`` where
  all it does is write and print, followed by ``accel.barrier()`` where every
  process reaches the call together (a helper that only makes a folder too:
  the others may write into it next, torchdiffeq's ``makedirs(args.save)``
  before ``get_logger``'s ``FileHandler`` there); a needs-review finding naming
  its file where it also hands back or changes a value, or calls collectives
  (named: ``all_reduce``, ``barrier``); one whose only calls of
  ``torch.distributed`` ask which process it runs on (torchvision's
  ``save_on_master``, ``if is_main_process(): torch.save(...)`` over
  ``get_rank()``) is said to ask, not to call collectives, and is left as it
  is: its own test of the rank chooses who writes. A class whose instance
  the script reads a value off (an attribute that is not a method call,
  ``if early_stopping.early_stop: break``, or a method call whose result it
  uses) is left on every process with a needs-review finding: the other
  processes' stand-in would answer the read with itself, true whatever the
  object holds (``instance_reads``).
- in batch mode, calls of a method of an instance of a class that another
  training file of the batch defines and that writes files (PyTorch-BYOL's
  ``trainer.train(dataset)``, whose class ends with ``self.save_model(path)``):
  that file makes the writes main-process ones, so ``accel.barrier()`` follows
  the call where every process reaches it together (a needs-review finding
  where not), and no process reads the files before they are written.
- a call of a method of an instance of a class of a local module that is not
  migrated (a model class) where the method itself writes files (word2vec's
  ``model.save_embedding(id2word, path)`` with its ``open(path, "w")``) is
  reported as needs-review: it runs on every process, and the rule cannot move
  a method of the project to the main process (it may read parameters that
  FSDP shards, or hand something back). Where every process reaches the call
  together, ``accel.barrier()`` precedes and follows it, so that no process
  reads the file while another still writes it (CosFace_pytorch's
  ``model.module.save(path)`` then ``lfw_eval.eval(path)`` each epoch).
  A class of a local module whose building writes nothing, while methods of it
  do (GLUE's ``BertConfig``, whose ``to_json_file`` opens a file for writing,
  ``HelperFact.method_effects``), is reported where those methods are called
  in the file (``model_to_save.config.to_json_file(path)``, a needs-review
  naming the method and what it writes), with an info finding at the build.

## Why
Every process runs the script. Without this, N processes would each create a
TensorBoard event file and a wandb run, and append the same lines to the same
CSV or JSON log at the same time (interleaved, or truncated by each other's
``"w"``). The stand-in keeps the script unchanged around it: ``writer.add_scalar``,
``f.write``, ``csv.writer(f)``, ``json.dump(x, f)`` and ``torch.save(obj, f)`` still
run on every process and do nothing but on the main one.

A checkpoint is written on the main process only (``accel.save``, AM010), so a
``shutil.copyfile(filename, "model_best.pth.tar")`` after it would fail on the
other processes (no such file yet) or copy a stale one, and two processes
removing or renaming the same file race (``FileNotFoundError`` on the slower).
On the main process the copy, move or removal runs after the save, in the
order of the script. Each call is moved on its own, rather than the helper that
holds it: the helper's other statements (and the arguments, which may hold a
collective) still run on every process. The arguments are still
evaluated on every process, so a logged ``accel.global_loss(loss)`` (a
collective) is reached by all of them.

## Example
```python
# before
writer = SummaryWriter(log_dir=run_dir)
log = open(os.path.join(run_dir, "metrics.csv"), "w")
wandb.log({"loss": loss.item()}, step=step)
# after
writer = accel.on_main_process(SummaryWriter, log_dir=run_dir)
log = accel.on_main_process(open, os.path.join(run_dir, "metrics.csv"), "w")
accel.on_main_process(wandb.log, {"loss": accel.global_loss(loss).item()}, step=step)

# before
def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, "model_best.pth.tar")
# after
def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    accel.save(state, filename)                      # AM010
    if is_best:
        accel.on_main_process(shutil.copyfile, filename, "model_best.pth.tar")
```

## Fix safety
Safe for output that only the script's user reads: what the main process writes
is what the original script wrote (with AM008 and AM009 the logged values are
global). A tensor written from a process's share of a batch is that share's:
AM041 reports a batch taken once off a sharded loader (``fixed_x, _ =
next(iter(test_loader))``) whose images or reconstructions are saved. A file that the script writes and then reads back on every process (on a
later line, or anywhere in a loop around the write, whose next pass reads it) is
left as it is and reported as needs-review (the other processes would find no
file, or read it before it is written); a path handed after the write to a
function or class of the project counts as read back (``write_corpus(
args.corpus)`` then ``InputData(args.corpus)``, which opens it in another
module; also what a caller passes where the path is a parameter of the function
that writes, and, later in the same function, the object the path is read from:
BiDAF-pytorch writes ``args.prediction_file`` and calls ``evaluate.main(args)``),
unless it is written in a ``with open(...)``
statement that every process reaches together, outside any loop and not under a
test of the file system (``if not os.path.exists(path):``, which a process that
tests after the main process has written skips; nor around a call of the
function that writes, at any depth: the finding then names that test and its
line, and the barrier belongs before it): then it is
written on the main process and ``accel.barrier()`` follows the ``with`` (the file
is closed by then), so every process reads what the main process wrote. A copy, move or rename whose
destination the script uses again (reads it, lists it, tests it, passes it to a
call other than a main-process write) is followed by ``accel.barrier()`` where
every process reaches it, and left as it is with a needs-review finding where
only some do. On several nodes the destination must be on a folder that all of
them share: a copy to a node's own disk (``/tmp``) is made on the main node only. A file operation whose result is used (``dst = shutil.copy(...)``) is
left as it is and reported as needs-review, and so is a copy or move of a path
each process makes for itself (``tempfile``, ``os.getpid()``); removing such a
path is left to every process. ``os.makedirs`` is AM018's: every process makes
the folder. Files changed another way (``os.system``, ``subprocess``) are not
seen. Reading ``wandb.run``, ``wandb.config`` or
``wandb.summary`` is reported as needs-review: they are only set on the main
process (under a sweep the config comes from the wandb server, on the main
process only).
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..array_writes import array_write
from ..file_change_calls import change_files, file_change
from ..file_changes import PATH_WRITERS, written_path
from ..file_reads import FileReads, loops
from ..file_tests import file_test, file_test_note
from ..helper_effects import helper_call
from ..instance_writes import (
    instance_call,
    method_writes,
    report_method_writes,
    writing_instance,
)
from ..rule import Rule
from ..save_calls import OPEN_CALLS, write_mode

LOGGER_CLASSES = frozenset(
    {
        "torch.utils.tensorboard.SummaryWriter",
        "torch.utils.tensorboard.writer.SummaryWriter",
        "tensorboardX.SummaryWriter",
        "tensorboardX.writer.SummaryWriter",
    }
)
RUN_FUNCTIONS = frozenset(
    {
        *(
            f"wandb.{name}"
            for name in (
                "init",
                "log",
                "finish",
                "watch",
                "unwatch",
                "save",
                "log_artifact",
                "log_model",
                "use_artifact",
                "alert",
                "define_metric",
            )
        ),
        *(
            f"mlflow.{name}"
            for name in (
                "start_run",
                "end_run",
                "log_metric",
                "log_metrics",
                "log_param",
                "log_params",
                "log_artifact",
                "log_artifacts",
                "log_dict",
                "log_text",
                "log_figure",
                "set_tag",
                "set_tags",
                "pytorch.log_model",
            )
        ),
    }
)
RUN_STATE = frozenset({"wandb.run", "wandb.config", "wandb.summary"})


class MainProcessWrites(Rule):
    code = "AM017"
    name = "main-process-writes"
    summary = "SummaryWriter / wandb / open(path, 'w') / save_image / shutil.copyfile / os.remove -> accel.on_main_process(...)"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        helper = self.index.helper(original_node.func)
        if helper is not None and helper.side_effects and not helper.returns:
            return helper_call(self, original_node, updated_node, helper)
        instance = writing_instance(self, original_node)
        if instance is not None:
            instance_call(self, original_node, instance)
            return updated_node
        writing_method = method_writes(self, original_node)
        if writing_method is not None:
            report_method_writes(self, original_node, writing_method)
            return updated_node
        names = self.qualnames(original_node.func)
        if names & LOGGER_CLASSES:
            what = "logger created on the main process only"
        elif names & RUN_FUNCTIONS:
            name = sorted(names & RUN_FUNCTIONS)[0]
            what = f"{name}(...) runs on the main process only"
        elif writers := names & PATH_WRITERS.keys():
            name = sorted(writers)[0]
            if self._file_reads.read_again(
                original_node, written_path(original_node, name)
            ):
                self._report_read_again(original_node)
                return updated_node
            what = f"{name}(...) writes its file on the main process only"
        elif (array := array_write(self, original_node)) is not None:
            if self._file_reads.read_again(original_node, array[1]):
                self._report_read_again(original_node)
                return updated_node
            what = f"{array[0]}(...) writes its file on the main process only"
        elif (change := file_change(self, original_node)) is not None:
            return change_files(self, original_node, updated_node, *change)
        elif names & OPEN_CALLS and (mode := write_mode(original_node)) is not None:
            if self._file_reads.read_again(original_node, written_path(original_node)):
                block = self._closed_before_read(original_node)
                if block is None:
                    self._report_read_again(original_node)
                    return updated_node
                self._barrier_after_with.add(block)
                self.report(
                    original_node,
                    "fixed",
                    "the file is read back later -> accel.barrier() after the `with` "
                    "that writes it, so that no process reads it before the main "
                    "process has written and closed it",
                )
            what = f'file opened for writing ("{mode}") on the main process only'
        else:
            return updated_node
        self.report(original_node, "fixed", f"{what} -> accel.on_main_process(...)")
        return self.on_main_process(updated_node)

    @cached_property
    def _barrier_after(self) -> set[cst.Call]:
        """Calls (of the original tree) that a barrier follows."""
        return set()

    def barrier_after(self, call: cst.Call) -> None:
        """Follow the statement ``call`` makes (``f(...)``, ``x = f(...)``) with
        ``accel.barrier()``."""
        self._barrier_after.add(call)

    @cached_property
    def _barrier_around(self) -> set[cst.Call]:
        """Calls (of the original tree) that a barrier precedes and follows."""
        return set()

    def barrier_around(self, call: cst.Call) -> None:
        """Put the statement ``call`` makes between two ``accel.barrier()``."""
        self._barrier_around.add(call)

    def _closed_before_read(self, call: cst.Call) -> cst.With | None:
        """The ``with open(path, "w") as f:`` statement ``call`` opens, when a barrier
        after it is safe and enough: every process reaches it together, and no loop
        is around it (whose next pass could read before the barrier). Not under a
        test of the file system (BiDAF-pytorch's download step, ``if not
        os.path.exists(args.dev_file):``), here or around a call of the function
        it is in (``file_tests``): a process that tests after the main process
        has written finds the file and skips the barrier (a hang)."""
        item = self.parent(call)
        block = self.parent(item) if isinstance(item, cst.WithItem) else None
        if not isinstance(block, cst.With) or loops(self.index, call):
            return None
        if file_test(self, block) is not None:
            return None
        return block if self.index.uniform(block) else None

    @cached_property
    def _barrier_after_with(self) -> set[cst.With]:
        """``with`` statements (of the original tree) that a barrier follows."""
        return set()

    def leave_With(
        self, original_node: cst.With, updated_node: cst.With
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if original_node not in self._barrier_after_with:
            return updated_node
        return self._barrier_after_statement(updated_node)

    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        values = [
            s.value for s in original_node.body if isinstance(s, (cst.Expr, cst.Assign))
        ]
        if any(v in self._barrier_around for v in values):
            before, after = (
                cst.SimpleStatementLine(
                    body=[cst.Expr(self.runtime_call("barrier", []))]
                )
                for _ in range(2)
            )
            return cst.FlattenSentinel(
                [
                    before.with_changes(leading_lines=updated_node.leading_lines),
                    updated_node.with_changes(leading_lines=()),
                    after,
                ]
            )
        if not any(v in self._barrier_after for v in values):
            return updated_node
        return self._barrier_after_statement(updated_node)

    def _barrier_after_statement(
        self, statement: cst.BaseStatement
    ) -> cst.FlattenSentinel[cst.BaseStatement]:
        barrier = cst.SimpleStatementLine(
            body=[cst.Expr(self.runtime_call("barrier", []))]
        )
        return cst.FlattenSentinel([statement, barrier])

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if not self.qualnames(node) & RUN_STATE:
            return
        parent = self.parent(node)
        if isinstance(parent, cst.Attribute) and self.qualnames(parent) & RUN_STATE:
            return
        name = sorted(self.qualnames(node) & RUN_STATE)[0]
        self.report(
            node,
            "needs-review",
            f"`{name}` is only set on the main process (wandb.init runs there only); "
            "on the others it is empty: read settings from the script's own arguments",
            if_migrated=True,
        )

    @cached_property
    def _file_reads(self) -> FileReads:
        return FileReads(self)

    def _report_read_again(self, call: cst.Call) -> None:
        test = file_test(self, call)
        if test is not None:
            self.report(
                call,
                "needs-review",
                "a file that every process writes and the script reads back: "
                "write it on the main process only (accel.on_main_process) and "
                "add accel.barrier() before it is read; here "
                + file_test_note(self, test),
                if_migrated=True,
            )
            return
        self.report(
            call,
            "needs-review",
            "a file that every process writes and the script reads back: "
            "write it on the main process only (accel.on_main_process) "
            "and add accel.barrier() before it is read, where every process "
            "reaches it",
            if_migrated=True,
        )
