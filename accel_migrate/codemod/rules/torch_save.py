"""AM010 torch-save: ``torch.save(obj, path)`` becomes ``accel.save(obj, path)``.

## What
Rewrites calls of ``torch.save`` (any import spelling) into ``accel.save`` with
the same arguments.

## Why
Every process runs the script, so every process would write the same file at
the same time: at best N times the work, at worst a corrupt file. ``accel.save``
writes on the main process only, atomically (a temporary file in the same folder,
then a rename), so a crash never leaves a truncated checkpoint.

## Example
```python
# before
torch.save(model.state_dict(), "mnist_cnn.pt")
# after
accel.save(accel.state_dict(model), "mnist_cnn.pt")   # with AM011
```

## Fix safety
Safe where the object saved is the same on every process (a model's or an
optimizer's state, a global metric): the file then has the same content as the
original script's. A tensor made from a process's share of a batch is not: the
main process writes its share's (a batch taken once off a sharded loader and
saved every epoch is reported by AM041). Gathering a
sharded (FSDP) state dict is a collective, so the object is still built on every
process; only the write is the main process's. A whole prepared model
(``torch.save(model, f)``) pickles as the user's module under DDP, and the
finding says that under FSDP or ZeRO-3 ``accel.save`` raises for it (its
parameters are split): ``accel.state_dict(model)`` is what to save there (not
rewritten: the script's ``torch.load(f)`` expects a module). When the script loads the same
file again further down, or in another function (which may run after the save
whatever its line: philipperemy/n-beats' ``load(net, optimiser)``, defined above
``save(...)``, resumes each chunk of training from what the last one saved),
or hands a path that may name it to a function or class of the project (two
paths built from one template are taken for the same file:
pytorch/examples super_resolution saves ``"model_epoch_{}.pth".format(epoch)``
and hands ``"model_epoch_{}.pth".format(opt.nEpochs)`` to super_resolve.py,
which loads it),
``accel.barrier()`` follows the save so that no process reads it before it is
written (needs-review where only some processes reach the
save, and where a test of the file system decides whether it runs, ``if not
os.path.exists(INIT): torch.save(...)``, here or around a call of its function:
a process that tests after the main process has written skips the branch, so
the barrier belongs before the test; where that test is an ``if`` statement
every process reaches alike, ``accel.barrier()`` follows the whole ``if``
instead, fixed: every process reaches it whatever its own test says, and the
main process has written the file before any goes on. Not where the saved
object is built under the test by a collective, a state dict under FSDP, nor
where either arm of the ``if`` leaves the block: a ``return``, ``break``,
``continue``, ``raise`` or exit call skips the statement after it). A save
inside a ``try`` whose ``except`` catches its error (``save_tries``) gets its
barrier after the whole ``try`` instead, fixed: only the main process writes,
so only it can fail and jump to the ``except``, past a barrier right after the
save that the others would wait at forever. Needs-review, with no barrier,
where that ``try`` is not a statement every process reaches, an arm of it
leaves the block, the file is read again inside it, it is inside another
``try``, or it is around a call of a function that saves and that is called
elsewhere too or named other than in that call (a ``try`` around the one
call of ``cache(stats)`` gets the barrier after it). A save into
an in-memory buffer (``io.BytesIO``) is left as it is: each process has its own
buffer and reads it back. So is a save into a path made from a value each
process has its own of (``file_changes.per_process``: a folder from
``tempfile.mkdtemp()`` or bound by ``with tempfile.TemporaryDirectory() as
tempdir:``, ``os.getpid()``; not ``tempfile.gettempdir()``, which every process
shares), reported as info with no barrier: each process writes
its own file and reads its own back, as the original did, where ``accel.save``
would write the main process's only and the others would find none (measured:
a best checkpoint reloaded under ``if os.path.exists(best_path):`` was
reloaded by the main process alone, and the losses after it differed).

A save in code a data loader runs per sample or batch (a Dataset's
``__getitem__``, a ``collate_fn``: a feature cache written on first use; also a
method of another local object they call, ``self.cache.put(i, feat)``, and the
``__getitem__`` of a class that derives from no Dataset but reaches the loader
through ``Subset``, ``ConcatDataset`` (also of a list variable) or
``random_split``, or a local wrapper Dataset's ``self.base[i]``) is left
as it is and reported: each process loads its own samples, so the main process
alone would write only its share's files, and a barrier there would be reached a
different number of times on each process. Where the training code also calls
that function (``store.put("model.pt", model.state_dict())`` through the
``Store`` whose ``put`` a Dataset's ``__getitem__`` calls:
``data_pipeline.training_caller``), neither rewrite is right for both callers:
kept, every process would write the checkpoint (under FSDP a process's empty
state dict over the main process's); made ``accel.save``, each sample's file
would be the main process's only. The whole file is left unmigrated, with a
needs-review naming both callers.

A save into a file the script opens from a path, ``with open(path, "wb") as f:
torch.save(obj, f)``, would be every process writing the same file: when the
``with`` holds nothing else it becomes ``accel.save(obj, path)``. Otherwise the
save is left as it is, and the write-mode ``open`` is opened on the main process
only (AM017); a handle opened in a mode that cannot be read from the code is
reported as needs-review.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import attr_chain
from ..branch_exits import leaves_block
from ..data_pipeline import loader_run_function_of, training_caller
from ..file_changes import argument, per_process
from ..file_tests import describe, file_test, file_test_note
from ..handle_saves import HandleSaves
from ..patterns import prepared_models
from ..rule import Rule
from ..save_calls import SAVE_CALLS, save_target, write_mode
from ..save_tries import place_after_try, try_around
from ..saves_read_back import ReadBack
from ..subtrees import findall


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


class TorchSave(ReadBack, HandleSaves, Rule):
    code = "AM010"
    name = "torch-save"
    summary = "torch.save(obj, path) -> accel.save(obj, path) (main process, atomic)"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self.is_call_to(original_node, SAVE_CALLS):
            return updated_node
        target = save_target(original_node)
        if target is not None and self._in_memory(target):
            return updated_node  # every process writes its own buffer: nothing shared
        if target is not None and per_process(self.index, target):
            self.report(
                original_node,
                "info",
                f"torch.save into `{code_of(target)}`, a path made from a value "
                "each process has its own of (a folder tempfile makes, "
                "mkdtemp() or TemporaryDirectory(), or os.getpid()): each "
                "process writes its own file and reads its own "
                "back, as the original did, so it is left as it is (accel.save "
                "would write only the main process's, and the others would read "
                "a file that is not there)",
            )
            return updated_node
        if original_node in self.collapsed_saves:
            return updated_node  # the whole `with open(...)` becomes accel.save
        loader_run = self._run_by_loader(original_node)
        if loader_run is not None:
            caller = training_caller(self.index, original_node)
            if caller is not None:
                self._block_shared_saver(original_node, loader_run, caller)
                return updated_node
            self.report(
                original_node,
                "needs-review",
                f"torch.save in {loader_run}: each process loads its own samples, "
                "so the main process alone would write only its share's files, and "
                "a barrier there would be reached a different number of times on "
                "each process; left as it is (every process writes the files of "
                "the samples it loads). Write such a cache before training, on "
                "the main process, followed by accel.barrier()",
                if_migrated=True,
            )
            return updated_node
        if target is not None and self._opened_handle(target) is not None:
            opened = self._opened_handle(target)
            if opened is not None and write_mode(opened) is None:
                self.report(
                    original_node,
                    "needs-review",
                    "torch.save into a file opened from a path: every process writes the same file; save with accel.save(obj, path)",
                    if_migrated=True,
                )
            # A write-mode `open(...)` is opened on the main process only (AM017):
            # the other processes write into a stand-in that keeps nothing.
            return updated_node
        self.report(
            original_node,
            "fixed",
            "torch.save -> accel.save (main process, atomic)"
            + self._whole_model_note(original_node),
        )
        return updated_node.with_changes(func=self.runtime_attr("save"))

    def _whole_model_note(self, save: cst.Call) -> str:
        """What a save of a whole prepared model (``torch.save(model, f)``, not
        its state dict) keeps: the user's module under DDP (the prepared model
        pickles as it), and no file under FSDP or ZeRO-3, where ``accel.save``
        raises (the parameters are split across the processes)."""
        obj = argument(save, 0, "obj")
        if obj is None or not self.index.holds_tagged(obj, prepared_models(self.index)):
            return ""
        return (
            f"; it saves the whole prepared model `{code_of(obj)}`: under DDP the "
            "file holds your module, as the original's did, but under FSDP or "
            "DeepSpeed ZeRO-3 its parameters are split across the processes and "
            "accel.save raises; to run those, save "
            f"accel.state_dict({code_of(obj)}) and load it into a new model"
        )

    def leave_With(
        self, original_node: cst.With, updated_node: cst.With
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        found = self._collapsible(original_node)
        if found is None:
            return updated_node
        save, path = found
        body = updated_node.body
        assert isinstance(body, cst.IndentedBlock)
        line = body.body[0]
        assert isinstance(line, cst.SimpleStatementLine)
        updated_save = line.body[0].value  # type: ignore[attr-defined]
        obj = argument(updated_save, 0, "obj")
        assert obj is not None
        new_path = updated_node.items[0].item.args[0].value  # type: ignore[attr-defined]
        call = self.runtime_call("save", [cst.Arg(value=obj), cst.Arg(value=new_path)])
        self.report(
            save,
            "fixed",
            "torch.save into a file opened from a path -> accel.save(obj, path) (main process, atomic)"
            + self._whole_model_note(save),
        )
        statement = cst.SimpleStatementLine(
            body=[cst.Expr(call)],
            leading_lines=updated_node.leading_lines,
            trailing_whitespace=line.trailing_whitespace,
        )
        if not (self._read_again(path, save) or self._handed_on(save, path)):
            return statement
        if self._in_try(save, original_node):
            return statement
        if self._under_file_test(save, original_node):
            return statement
        if not self.index.uniform(original_node):
            self.report(
                save,
                "needs-review",
                "the file is loaded again later, but saved where only some processes go: the others may read it before the main process has written it",
                if_migrated=True,
            )
            return statement
        self.report(
            save,
            "fixed",
            "the file is loaded again later -> accel.barrier() after the save, so that no process reads it before it is written",
        )
        barrier = cst.SimpleStatementLine(
            body=[cst.Expr(self.runtime_call("barrier", []))]
        )
        return cst.FlattenSentinel([statement, barrier])

    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        saves = [
            c
            for c in findall(original_node, m.Call())
            if c in self.read_back and self._run_by_loader(c) is None
        ]
        if not saves:
            return updated_node
        if self._in_try(saves[0], original_node):
            return updated_node
        if self._under_file_test(saves[0], original_node):
            return updated_node
        if not self.index.uniform(original_node):
            self.report(
                saves[0],
                "needs-review",
                "the file is loaded again later, but saved where only some processes go: the others may read it before the main process has written it",
                if_migrated=True,
            )
            return updated_node
        self.report(
            saves[0],
            "fixed",
            "the file is loaded again later -> accel.barrier() after the save, so that no process reads it before it is written",
        )
        barrier = cst.SimpleStatementLine(
            body=[cst.Expr(self.runtime_call("barrier", []))]
        )
        return cst.FlattenSentinel([updated_node, barrier])

    def _in_try(self, save: cst.Call, statement: cst.CSTNode) -> bool:
        """Is the save of a file loaded again inside a ``try`` whose ``except``
        catches its error? Then its barrier follows the whole ``try``, or it is
        reported (``save_tries.place_after_try``)."""
        return place_after_try(self, save, statement)

    def _under_file_test(self, save: cst.Call, statement: cst.CSTNode) -> bool:
        """Is the save of a file loaded again reached only by the processes that
        pass a test of the file system (``if not os.path.exists(INIT):``, here or
        around a call of its function)? Then no barrier follows it: where the
        test is an ``if`` that every process reaches (``_barrier_after``), the
        barrier follows that ``if``; else the save is reported."""
        test = file_test(self, statement)
        if test is None:
            return False
        if self._barrier_after(test, save):
            self._after_tests.add(test)
            self.report(
                save,
                "fixed",
                "the file is loaded again later -> accel.barrier() after the branch on "
                + describe(self, test)
                + ": every process reaches the statement after that `if`, whatever "
                "its own test says, so the barrier waits for none that never comes, "
                "and no process reads the file before the main process has written it",
            )
            return True
        self.report(
            save,
            "needs-review",
            "the file is loaded again later, but "
            + file_test_note(self, test, "the save")
            + " (the others may read the file before the main process has written "
            "it; under FSDP accel.state_dict(model) in that branch is a collective "
            "too: build the state before the test)",
            if_migrated=True,
        )
        return True

    def _barrier_after(self, test: cst.CSTNode, save: cst.Call) -> bool:
        """Can ``accel.barrier()`` follow the whole ``if`` that tests the file
        system? Where the ``if`` is a statement of a block that every process
        runs alike (not under a rank-dependent branch, nor under another test
        of the file system), every process reaches the statement after it,
        whether its own test passed or not: the barrier waits for none that
        never comes, and the main process has written the file (if its test
        passed) before any process goes on. Not where the saved object is
        built by a collective under the test (a state dict, under FSDP)."""
        if not isinstance(test, cst.If) or not isinstance(
            self.parent(test), (cst.IndentedBlock, cst.Module)
        ):
            return False  # an `elif`, an early exit, or around a call site
        if not any(a is test for a in self.index.ancestors(save)):
            return False
        if not self.index.uniform(test) or file_test(self, test) is not None:
            return False
        if leaves_block(test):
            return False  # a process that takes the branch would skip the barrier
        if try_around(self.index, test) is not None:
            # a main process whose save raises into the `except` skips it
            # (``save_tries``; ``_in_try`` places it after the `try`)
            return False
        built = [arg.value for arg in save.args]
        return not any(
            (isinstance(c.func, cst.Attribute) and c.func.attr.value == "state_dict")
            or (attr_chain(c.func) or "").startswith(f"{self.context.alias}.")
            for value in built
            for c in findall(value, m.Call())
        )

    @cached_property
    def _after_tests(self) -> set[cst.CSTNode]:
        """The file-system ``if``s (and the ``try``s, ``_in_try``) that
        ``accel.barrier()`` follows."""
        return set()

    def leave_Try(
        self, original_node: cst.Try, updated_node: cst.Try
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        return self.leave_If(original_node, updated_node)  # type: ignore[arg-type]

    def leave_If(
        self, original_node: cst.If, updated_node: cst.If
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if original_node not in self._after_tests:
            return updated_node
        barrier = cst.SimpleStatementLine(
            body=[cst.Expr(self.runtime_call("barrier", []))]
        )
        return cst.FlattenSentinel([updated_node, barrier])

    def _block_shared_saver(
        self, save: cst.Call, loader_run: str, caller: cst.Call
    ) -> None:
        line = self.context.original_start(self.wrapper, caller)[0]
        self.block(
            save,
            f"torch.save in {loader_run}, and also run by `{code_of(caller.func)}"
            f"(...)` at line {line}, outside the data loader: for the samples it "
            "must stay each process's own save (the main process alone would write "
            "only its share's files), for the training code's call it must become "
            "accel.save (every process would write the same file, one process's "
            "state over another's); no one rewrite of it is right for both "
            "callers, so the file is left whole. Save the samples' files and the "
            "training code's files through separate functions, then migrate again",
        )

    def _run_by_loader(self, node: cst.CSTNode) -> str | None:
        """What runs ``node`` per sample or batch, where a data loader does (a
        Dataset's ``__getitem__``, a ``collate_fn``): each process runs it for
        its own share, a different number of times."""
        # Not a generator the loader's batches pass through: every process runs
        # it once per batch alike (a per-epoch checkpoint there is a plain save).
        return loader_run_function_of(self.index, node)

    def _in_memory(self, expr: cst.BaseExpression) -> bool:
        """``io.BytesIO()``, or a variable that only ever holds one."""
        if isinstance(expr, cst.Call):
            return bool(self.qualnames(expr.func) & _BUFFERS)
        key = self.index.key(expr)
        values = self.index.values.get(key, []) if key is not None else []
        return bool(values) and all(
            isinstance(v, cst.Call) and self.qualnames(v.func) & _BUFFERS
            for v in values
        )


_BUFFERS = {"io.BytesIO", "_io.BytesIO"}
