"""AM028 rank-local-decisions: a decision taken on one process's share of the data stops the migration.

## What
After the other rules have made the script's metrics global (AM008's
``accel.global_loss`` for logged and compared losses, AM009's ``accel.reduce`` of
metric sums, AM029's ordered gathers), a value that still differs between
processes (computed from this process's share of the data, from its clock, its
random draws, or a variable the launcher sets per process, such as a
DDP-ready script's ``if os.environ.get("RANK", "0") == "0":`` or
``int(os.environ["LOCAL_RANK"])``, or the process group's own
``dist.get_rank()``) and that decides what the training does is
reported, and the file is left unchanged:

- an early exit: ``if epochs_since_improvement == patience: break``, ``if
  val_loss > best: patience += 1 ... if patience > n: break``, a time budget
  ``if time.time() - start > limit: break``, out of a loop that trains or
  evaluates; a skipped step, ``if not torch.isfinite(loss): continue`` before
  the backward;
- a learning-rate decision: ``scheduler.step(val_loss)`` of a ``ReduceLROnPlateau``
  (or any ``torch.optim.lr_scheduler``) on such a value, ``if acc < prev:
  g["lr"] *= 0.5``, or a learning rate assigned from such a value with no
  condition (``g["lr"] = base_lr * scale``, a warm-up over a sample count
  ``self.samples_seen += x.size(0)`` that a Trainer keeps); a store that puts
  back the value read from the same place before such a store, in the same
  block (awd-lstm-lm's ``lr2 = g["lr"]``, ``g["lr"] = lr2 * seq_len / bptt``,
  the step, ``g["lr"] = lr2``), is not a decision of its own: the scaled store
  is reported, the restore is not (``restored_values``);
- a checkpoint choice: ``is_best = acc > best_acc`` then ``if is_best:
  torch.save(...)`` or ``save_checkpoint(...)``;
- training, evaluating or a collective under such a condition, or a read of
  a prepared model's parameters, buffers or forward (``print("weight",
  float(model.weight[0, 0]))`` under ``if args.local_rank == 0:``;
  ``model_reads``): under FSDP the parameters are sharded, and the read
  gathers them by a collective that the processes not taking the branch never
  join;
- which terms the backpropagated loss has: a loss assigned on one side of such
  a branch only (``if pos.any(): loss = loss + box_loss`` with no ``else``,
  before ``loss.backward()``), as detection scripts guard a term of the
  positives. A loss assigned on both sides (teacher forcing or not, through
  the same decoder) is not reported.

A ``for`` over a list whose items differ between processes but whose length
does not is not a decision (NCSN's ``for i, sample in enumerate(all_samples):
torch.save(sample, ...)`` over the annealed Langevin samples, one appended per
step of loops every process runs alike: ``uniform_lengths.py``), nor a ``zip``
of such lists, data loaders and draws of a fixed size (ICM's ``for work, action
in zip(works, actions)`` over ``np.random.randint(0, n, size=(num_worker,))``);
the conditions inside it are still read. A ``zip`` of a data loader with a list
whose length differs between processes (``zip(loader, weights)``, ``weights``
grown from this process's share) makes as many turns as the shorter: a decision
on the number of steps, reported. Nor is a loop or branch whose value rests on random
draws alone (every source ``rank_local_sources`` finds is a draw) and that only
saves the drawn values themselves (``torch.save(sample, ...)`` over Langevin
samples kept when their draw passes a test: no model or optimizer state,
nothing collective): the main process saves its own draws, as the original
saved its own, and only the number of sample files differs, as draws do. Where
such a save rests on the data instead, the finding says that files the
original wrote can be missing and others appear.

A collective under the branch is named: ``accel.reduce(total)`` in its text,
or in the local function its call reaches (``if accel.is_main_process():
report(loss, epoch)`` whose ``report`` reduces: the finding names ``report``,
its line and the collective, and says to call the collective on every process
and report on the main one). A branch on the launcher's rank variable that
saves (``if args.local_rank in (-1, 0): torch.save(args, "training_args.bin")``)
is a hazard where it reaches a collective, or may (a state dict, gathered by
one under FSDP; a function of the project; a method of an object it cannot
name; a read of a prepared model's parameters); where every call it runs, in its text and in the local functions it
calls, is ``torch.save``, a runtime call that writes or prints, or one of a
library with no collective (``os.path``, ``logging``, ``json``), the finding
says that nothing waits on it, and why AM047 did not give it the runtime's
test: its ``else``, a call of the script's own function, a file read again
after it, or a test AM047 cannot prove the runtime's.

Each finding names where the value comes from (``rank_local_sources``): the
clock read, the random draw or the data loader, with its line and the variables
in between (``start_epoch`` read from a checkpoint in a folder named from
``datetime.datetime.now()`` at line 95), and a fix for that kind of source.

When the value is global already, nothing is reported: the usual case, since the
rules before this one make sums, counts and losses global where they can prove
how.

## Why
Every process runs the script on its share of each batch. A decision on a
process's own value is taken differently by different processes: at world 2 one
process stops at epoch 5 and the other trains on into epoch 6, where its
gradient all-reduce waits for a process that never comes (the job hangs until
the collective timeout); learning rates differ between processes, so their
replicas drift apart silently; the main process saves the "best" checkpoint on
its share's accuracy, not on the original's. A term added to the loss on some
processes only gives gradients to parameters (a box head) that the others leave
without one: DDP's gradient exchange then waits for buckets that some processes
never send, and the job aborts in a mismatched collective or hangs.

## Example
```python
# before
val_acc = external_metric(model, val_loader)  # a metric the rules cannot see into
if val_acc > best:
    best, bad_epochs = val_acc, 0
else:
    bad_epochs += 1
    if bad_epochs == patience:
        break
# after
# (unchanged) AM028 [needs-review] `val_acc > best` differs between processes ... and it
# decides an early exit: ranks can stop at different epochs and hang in the next
# collective
```

## Fix safety
This rule never rewrites: a value that only this process holds cannot be made
the original's here (an average of the processes' values is not the original's
value, so the decision would still differ from the original's). The fix is where
the value is computed: a sum and a count reduced with ``accel.reduce`` (AM009
does it for the shapes it recognises), or a loss read through
``accel.global_loss``. A decision that changes nothing shared (a print, an
assignment) is not reported; a later decision on the assigned value is. A save
under a condition on the clock (``if time.time() - start > 3600: torch.save(...)``)
is not reported: the main process's clock decides as the original's did (AM011
reports the state dict's collective under FSDP there); an exit or a collective
under it is. Nor is a save under the runtime's own test of the process,
``if accel.is_main_process():`` (AM047 writes it for a DDP-ready script's
``if rank == 0:`` that only writes output, or a second run meets it): that is
where one process's writes belong; a collective or an exit under it is
reported, as being true on one process only, and so is an
``accel.state_dict(model)`` that the file already has under it (a second run
of ``if accel.is_main_process(): accel.save(accel.state_dict(model), ...)``),
in the branch's text or in a local function the branch calls, at any depth
(``if accel.is_main_process(): save_weights(net)`` whose ``save_weights``
calls it: ``reached_calls``; a collective is found the same way):
under FSDP it is a collective every process must call, to be moved above the
branch (the one AM011 writes there in this run is AM011's finding). Only the
outermost rank-dependent condition of a nest is reported. The analysis errs
towards rank-dependent (see ``codemod/divergence.py``), so a value that is the
same on every process for a reason the analysis does not see is reported too.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from .. import rank_local_reasons as reasons
from ..divergence import MAIN_PROCESS_TESTS
from ..file_reads import FileReads
from ..handed_zips import handed_zip_parts
from ..main_process_tests import main_process_test
from ..names import DATALOADER_CALLS
from ..rank_local_branches import BranchContents, run_by, sets_learning_rate
from ..rank_local_reasons import (
    CHECKPOINT,
    COLLECTIVE,
    EXIT,
    GROUP_TAKERS,
    LEARNING_RATE,
    LOSS_TERM,
    MODEL_READ,
    NAMED_END,
    RANK_BRANCH,
    SAMPLE_FILES,
    SKIP,
    STATE_DICT,
    VARIABLE_TAKERS,
)
from ..restored_values import restores_saved
from ..rule import Rule
from ..subtrees import findall
from ..uniform_lengths import uniform_length, zipped_parts


class RankLocalDecisions(BranchContents, Rule):
    code = "AM028"
    name = "rank-local-decisions"
    summary = "control flow on a value that differs between processes (early stop, LR decay, is_best) -> needs-review, file unchanged"
    #: After every rule that makes values global (AM008, AM009, AM029).
    phase = 60

    def visit_If(self, node: cst.If) -> None:
        self._decision(node, node.test, [node.body, node.orelse])

    def visit_While(self, node: cst.While) -> None:
        self._decision(node, node.test, [node.body])

    def visit_For(self, node: cst.For) -> None:
        if self._uniform_loop(node):
            return  # as many turns on every process: the decisions are inside
        if not self.index.loader_loop(node.iter)[0] and not self._made_loader(
            node.iter
        ):
            self._decision(node, node.iter, [node.body])
            return
        # `zip(loader, weights)`: as many turns as the shorter; where `weights`
        # differs between processes (the divergence analysis marks the body),
        # its length may too
        parts = zipped_parts(
            self.index, node.iter, lambda part: self.index.loader_loop(part)[0]
        )
        if parts:
            self._decision(
                node,
                parts[0] if len(parts) == 1 else node.iter,
                [node.body],
                handed=handed_zip_parts(self.index, node, parts),
            )

    def _uniform_loop(self, node: cst.CSTNode) -> bool:
        """A ``for`` over a list whose items differ between processes but whose
        length does not (``uniform_lengths``)."""
        if not isinstance(node, cst.For):
            return False
        if node not in self._uniform:
            self._uniform[node] = uniform_length(self.index, node.iter)
        return self._uniform[node]

    @cached_property
    def _uniform(self) -> dict[cst.For, bool]:
        return {}

    def _made_loader(self, iterable: cst.BaseExpression) -> bool:
        """``get_loader(args)``: a function of this file that returns a DataLoader,
        which has as many batches on every process once sharded."""
        if not isinstance(iterable, cst.Call):
            return False
        function = self.index.local_function(iterable.func)
        if function is None:
            return False
        for ret in findall(function.body, m.Return()):
            value = ret.value  # type: ignore[attr-defined]
            if isinstance(value, cst.Call) and (
                self.qualnames(value.func) & DATALOADER_CALLS
                or self.index.is_runtime_call(value, "prepare_dataloader")
            ):
                return True
        return False

    def visit_Call(self, node: cst.Call) -> None:
        """``scheduler.step(value)`` on a value that differs between processes."""
        divergence = self.index.divergence
        if node not in divergence.local_calls or not self._steps_scheduler(node):
            return
        if self._inside_reported(node):
            return
        self._block_on(node, node.args[0].value, LEARNING_RATE)

    def visit_Assign(self, node: cst.Assign) -> None:
        """``g["lr"] = base_lr * scale`` with a ``scale`` that differs between
        processes (a warm-up over ``self.samples_seen += x.size(0)``): no
        condition decides, the value is the decision."""
        if node in self.index.divergence.local_stores and not restores_saved(
            self, node
        ):
            self._learning_rate_value(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self.index.divergence.rank_local(node):
            self._learning_rate_value(node)

    def _learning_rate_value(self, node: cst.Assign | cst.AugAssign) -> None:
        if sets_learning_rate(node) and not self._inside_reported(node):
            self._block_on(node, node, LEARNING_RATE)

    # -- decisions ------------------------------------------------------------------
    def _decision(
        self,
        node: cst.CSTNode,
        test: cst.BaseExpression,
        blocks: list[cst.CSTNode | None],
        handed: bool = False,
    ) -> None:
        divergent = self.index.divergence.divergent
        if (
            node.body not in divergent and not handed  # type: ignore[attr-defined]
        ) or self._inside_reported(node):
            return
        hazard = self._hazard(node, test, [b for b in blocks if b is not None])
        if hazard is not None:
            self._block_on(node, test, hazard)

    def _inside_reported(self, node: cst.CSTNode) -> bool:
        """Inside a block that is rank-dependent already (its outer decision is
        reported, or was judged harmless with everything under it)."""
        divergent = self.index.divergence.divergent
        return any(
            a in divergent and not self._uniform_loop(self.parent(a) or a)
            for a in self.index.ancestors(node)
        )

    def _hazard(
        self, node: cst.CSTNode, test: cst.BaseExpression, blocks: list[cst.CSTNode]
    ) -> str | None:
        run = [n for block in blocks for n in run_by(block)]
        hazards = []
        reached = next(
            ((n, c) for n in run if (c := self._collective_reached(n)) is not None),
            None,
        )
        if reached is not None:
            hazards.append(self._named_collective(*reached))
        elif any(self._collective(n) for n in run):
            hazards.append(COLLECTIVE)
        else:
            state_dict = self._state_dict_run(run) if self._main_process(test) else None
            read = self._model_read(test, run)
            if state_dict is not None:
                hazards.append(state_dict)
            elif read is not None:
                hazards.append(MODEL_READ.format(read=_code(read)))
        exit_kind = self._exits(node, run)
        if exit_kind is not None:
            hazards.append(SKIP if exit_kind == "continue" else EXIT)
        if not hazards and self._changes_backpropagated(node):
            hazards.append(LOSS_TERM)
        if any(sets_learning_rate(n) for n in run) or any(
            isinstance(n, cst.Call) and self._steps_scheduler(n) for n in run
        ):
            hazards.append(LEARNING_RATE)
        saves = [n for n in run if isinstance(n, cst.Call) and self._saves(n, 0)]
        if saves and not self._reads_clock(test) and not self._main_process(test):
            # (A save on the main process's clock is the original's decision; the
            # state dict's collective under FSDP is AM011's finding.)
            if not self._samples_saved(saves):
                hazards.append(CHECKPOINT)
            elif hazards or not self._drawn(test):
                hazards.append(SAMPLE_FILES)
        return "; and ".join(hazards) or None

    def _named_collective(self, node: cst.Call, collective: cst.Call) -> str:
        """COLLECTIVE, naming the collective: in the branch's text, or in the
        local function the branch's call reaches (``reached_calls``)."""
        name = _code(collective.func)
        if collective is node:
            where = f"`{_code(collective)}` is a collective"
            self._helpers.pop(name, None)
        else:
            function = self.index.enclosing_function(collective)
            helper = function.name.value if function is not None else "?"
            callee = self.index.callee(node)
            verb = (
                "calls" if callee is not None and callee[0] is function else "leads to"
            )
            where = (
                f"`{_code(node)}` {verb} `{helper}`, whose `{_code(collective)}` "
                f"(line {self.original_line(collective)}) is a collective"
            )
            self._helpers[name] = helper
        return f"whether `{name}` runs: {where}{NAMED_END}"

    @cached_property
    def _helpers(self) -> dict[str, str]:
        """The local function that runs each named collective (its fix names it)."""
        return {}

    def _collective_fix(self, hazard: str) -> str | None:
        """The fix of a named collective under the branch (and no exit)."""
        if NAMED_END not in hazard or EXIT in hazard or SKIP in hazard:
            return None
        name = hazard[len("whether `") :].split("`", 1)[0]
        helper = self._helpers.get(name)
        if helper is not None:
            return (
                f"call `{name}` on every process, outside the branch (call "
                f"`{helper}` there, or take the collective out of it and hand "
                "it the result), and report on the main process only under the "
                "branch"
            )
        return (
            f"call `{name}` on every process, above the branch, and report its "
            "result on the main process only under the branch"
        )

    def _rank_branch(self, node: cst.CSTNode, takers: str) -> str:
        """RANK_BRANCH where the branch reaches a collective, or may (a state
        dict, a function of the project); else what it is and why AM047 left
        it: it reaches nothing collective and only saves."""
        blocks = [getattr(node, "body", None), getattr(node, "orelse", None)]
        run = [n for b in blocks if b is not None for n in run_by(b)]
        if not self._only_local_calls(run):
            return RANK_BRANCH.format(takers=takers.format(branch="the branch"))
        return (
            "which processes write what the branch saves: "
            f"{takers.format(branch='it')}; it reaches "
            "no collective (no state dict, "
            "nothing of torch.distributed or the runtime's collectives, here or "
            "in the functions it calls), so nothing waits on it, but "
            + self._not_output(node, run)
        )

    def _not_output(self, node: cst.CSTNode, run: list[cst.CSTNode]) -> str:
        """Why AM047 did not give the branch the runtime's test."""
        if isinstance(node, cst.If) and main_process_test(self, node.test) is None:
            return (
                "AM047 proves its test true on exactly the runtime's main "
                "process (of each machine) only for a read of RANK or LOCAL_RANK "
                "(or an option defaulting to one) whose unset default passes "
                "the test, in a file that stores nothing into it, and this test "
                "is not one"
            )
        if not isinstance(node, cst.If):
            return "it is a loop, not an `if` that AM047 rewrites"
        if node.orelse is not None:
            return (
                f"its `else` (line {self.original_line(node.orelse)}) runs on "
                "the other processes, and AM047 rewrites no branch with one"
            )
        for call in run:
            if isinstance(call, cst.Call) and self.index.callee(call) is not None:
                return (
                    f"it calls `{_code(call)}`, a function of the script, which "
                    "AM047 does not follow to prove the branch output only"
                )
        reads = FileReads(self)
        for call in run:
            if isinstance(call, cst.Call) and self._saves(call, 0):
                path = call.args[1].value if len(call.args) > 1 else None
                if path is not None and reads.read_again(call, path):
                    return (
                        f"the file it saves (`{_code(path)}`) is read again "
                        "after it, and nothing makes the processes that read it "
                        "wait for the write"
                    )
        return "AM047 does not prove everything under it output only"

    def _state_dict_run(self, run: list[cst.CSTNode]) -> str | None:
        """``accel.state_dict`` of the user's own (a second run; AM011 reports
        the one it writes) that the branch runs, in its own text or in a local
        function it calls (``reached_calls``): STATE_DICT, naming the function."""
        for node in run:
            if not isinstance(node, cst.Call):
                continue
            for call in (node, *self.index.reached_calls.through(node)):
                if (
                    self.index.is_runtime_call(call, "state_dict")
                    and call in self.context.original_positions
                ):
                    if call is node:
                        return STATE_DICT
                    function = self.index.enclosing_function(call)
                    name = function.name.value if function is not None else "?"
                    return STATE_DICT.replace(
                        "runs:",
                        f"runs (in `{name}`, line {self.original_line(call)}, "
                        f"which `{_code(node)}` calls):",
                        1,
                    )
        return None

    def _main_process(self, test: cst.CSTNode) -> bool:
        """``accel.is_main_process()`` (AM047's, or a second run's): the
        runtime's choice of the process that writes, which is where the saves
        belong; only what every process must join (a collective, an exit out
        of training) is a hazard under it."""
        return any(
            self.index.is_runtime_call(c, *MAIN_PROCESS_TESTS)
            for c in findall(test, m.Call())
        )

    def _drawn(self, test: cst.BaseExpression) -> bool:
        """Does the decision rest on random draws alone (every source of its
        value is one, ``rank_local_sources``)? Then, where it only saves the
        drawn values themselves (``torch.save(sample, ...)`` over NCSN's
        filtered Langevin samples), the main process saves its own draws as the
        original saved its own: no checkpoint is chosen, nothing collective runs
        (``accel.save`` of a tensor is the main process's alone), and only how
        many sample files there are differs, as the draws do."""
        provenance = self.index.rank_local_sources.of(test)
        return provenance.complete and provenance.kinds == {"random"}

    def _block_on(self, node: cst.CSTNode, value: cst.CSTNode, hazard: str) -> None:
        asked = value.value if isinstance(value, cst.AugAssign | cst.Assign) else value
        source = self.index.rank_local_sources.first(asked)
        if hazard == CHECKPOINT and source is not None and source.kind == "environment":
            takers = GROUP_TAKERS if reasons.asks_group(source) else VARIABLE_TAKERS
            hazard = self._rank_branch(node, takers)
        if source is None and self._main_process(asked):
            fix = self._collective_fix(hazard) or (
                "move the collective or the exit out of the branch, so that "
                "every process reaches it"
            )
            self.block(
                node,
                f"`{_code(value)}` is true on one process only and it decides "
                f"{hazard}; the file is left unchanged: {fix}",
            )
            return
        self.block(
            node,
            f"`{_code(value)}` differs between processes "
            f"({reasons.why(source, self.original_line)}) and it decides {hazard}; "
            f"the file is left unchanged: {reasons.fix(source)}",
        )


def _code(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node).strip()
    return text if len(text) <= 60 else text[:57] + "..."
