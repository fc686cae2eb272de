"""AM044 sampled-writes: samples of the training batch saved every N steps are gathered from every process first.

## What
In a loop over a sharded data loader, a file the main process writes
(``accel.save``, AM010's, or ``accel.on_main_process(save_image, ...)``, AM017's)
from a tensor with one row per sample of the batch (the generator's output on
the batch's noise, the batch itself, ``torch.cat`` of such tensors along
another dimension; ``batch_samples.py`` says which) saves the samples of every
process: the tensor is gathered in rank order, ``accel.gather(x)``, before the
rows the original kept are sliced off it (``x[:25]``):

``accel.save(gen_imgs.data[:25], path)`` becomes
``accel.save(accel.gather(gen_imgs.data)[:25], path)``. Per-sample tensors
joined along the rows (``torch.cat((imgs, gen_imgs), 0)``) are gathered part by
part, ``torch.cat((accel.gather(imgs), accel.gather(gen_imgs)), 0)``: the
joined tensor gathered whole would interleave the processes' parts.

The gather is a collective. It is placed only where the write's condition is
the same on every process (``batches_done % opt.sample_interval == 0``, read by
the divergence analysis), inside the call's arguments, which every process
evaluates before the write is left to the main process. Where the condition may
differ between processes, or the saved value is read from the batch but not
proven to hold one row per sample (a tuple unpacked from a model, a mean, a
slice taken before it is saved), nothing is rewritten and a needs-review
finding names the saved value and its line. So too where the loop's loader
cannot be traced to the DataLoader calls it may be (a method's ``tr_loader``
that a wrapper method nothing in the file calls also hands on) and the saved
value is computed from its batch.

## Why
PyTorch-GAN's scripts save ``gen_imgs.data[:25]`` every ``sample_interval``
batches (SRGAN a grid of the batch's inputs and outputs). After
``accel.prepare_dataloader`` each process holds its share of the global batch,
and the main process alone writes: its share's rows, where the original's file
held the first 25 rows of the whole batch. Training is the original's and
nothing fails, so nothing else would tell.

The runtime gives each process a contiguous slice of every global batch, the
first processes one more row where it does not divide (no padding, no repeated
samples; an empty share where a last batch is shorter than the world), and the
noise AM034 draws for the global batch is sliced the same way. Concatenated in
rank order, the shares are the original batch's rows in the original order.

## Example
```python
# before
for i, (imgs, _) in enumerate(dataloader):
    ...
    gen_imgs = generator(z)
    ...
    batches_done = epoch * len(dataloader) + i
    if batches_done % opt.sample_interval == 0:
        torch.save(gen_imgs.data[:25], "images/%d.pt" % batches_done)
# after
    if batches_done % opt.sample_interval == 0:
        accel.save(accel.gather(gen_imgs.data)[:25], "images/%d.pt" % batches_done)
```

## Fix safety
Rewritten only when the value is proven per sample and the write is reached by
every process together; otherwise reported. In per-device batch mode (each
process takes whole batches) the gathered tensor holds every process's batch,
first the main process's: its first rows are the main process's batch's. The
gather copies the whole batch's rows to every process once per saved step.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..batch_samples import per_sample, row_joined_parts
from ..batches import LoaderLoop, loader_loop
from ..divergence import MAIN_PROCESS_TESTS
from ..file_tests import collective_note
from ..reduction.placement import code
from ..rule import Rule
from ..subtrees import findall

_SHARE_WRITTEN = (
    "the file holds the main process's share of the batch where the original's "
    "held the whole batch's rows"
)
_SAMPLE_WRITERS = frozenset({"torchvision.utils.save_image"})


class SampledWrites(Rule):
    code = "AM044"
    name = "sampled-writes"
    summary = (
        "samples of the batch saved by the main process (`torch.save(gen_imgs"
        ".data[:25], path)` in the loop) -> gathered from every process first "
        "(accel.gather), or reported"
    )
    #: After AM006 prepares the loaders, AM010 and AM017 rewrite the writes and
    #: AM034 draws the noise for the global batch.
    phase = 60

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        position = self._saved_position(original_node)
        if position is None:
            return updated_node
        value = original_node.args[position].value
        if self._gathers(value):
            return updated_node  # gathered already (a second run)
        reads = self.index.divergence.local_values.get(original_node, [])
        loop = self._loop(original_node)
        if loop is None:
            untraced = self._untraced_loop(original_node)
            if untraced is not None and reads:
                self._refuse(
                    value,
                    self.original_line(original_node),
                    "it is computed from the batch of the loop over "
                    f"`{code(untraced.iter)}` (line "
                    f"{self.original_line(untraced)}), a data loader whose "
                    "values accel-migrate cannot all trace to DataLoader calls "
                    "(a parameter some of whose callers it cannot follow, a "
                    "loader built by code it does not read), so it can neither "
                    "prove the rows are one per sample of a sharded share nor "
                    "gather them",
                    "where the loader is prepared (sharded), " + _SHARE_WRITTEN,
                )
            return updated_node
        base, _rows = _row_slice(value)
        proven = per_sample(self.index, base, loop.batch)
        parts = None if proven else row_joined_parts(self.index, base, loop.batch)
        if not proven and parts is None and not reads:
            return updated_node  # the same on every process (a model's state)
        line = self.original_line(original_node)
        if not proven and parts is None:
            self._refuse(
                value,
                line,
                "it is computed from this process's share of the batch, and "
                "accel-migrate cannot prove that it holds one row per sample of "
                "the share in order (a slice, a mean, a value unpacked from a "
                "model's output), which gathering the shares in rank order needs",
                _SHARE_WRITTEN,
            )
            return updated_node
        note = collective_note(self, original_node)
        if note:
            self._refuse(
                value,
                line,
                "it holds this process's rows, and the write may run on some "
                f"processes and not others{note}, so gathering the rows of every "
                "process there (a collective) could hang",
                _SHARE_WRITTEN,
            )
            return updated_node
        main_test = self._main_process_branch(original_node)
        if main_test is not None:
            self._refuse(
                value,
                line,
                "it holds this process's rows, and the write is under "
                f"`{code(main_test.test)}` (line {self.original_line(main_test)}), "
                "which only the main process passes, so gathering the rows of "
                "every process there (a collective) would wait for the others, "
                "which never come (a hang)",
                _SHARE_WRITTEN,
            )
            return updated_node
        if not self.index.divergence.uniform(original_node):
            self._refuse(
                value,
                line,
                "it holds this process's rows, and the write may run on some "
                "processes and not others (its condition, or the loop it is in, "
                "depends on this process's share, random draws or clock), so "
                "gathering the rows of every process there (a collective) could "
                "hang",
                "the main process writes when its own share passes the test, "
                "not when the whole batch does: a file the original wrote can be "
                "missing, one it did not write can appear, and a file written "
                "holds the main process's rows only where the original's held "
                "the whole batch's",
            )
            return updated_node
        new_base, new_rows = _row_slice(updated_node.args[position].value)
        if parts is not None:
            joined = self._gather_parts(new_base, len(parts))
            if joined is None:
                return updated_node
            new_base = joined
        else:
            new_base = self.runtime_call("gather", [cst.Arg(value=_bare(new_base))])
        new_value: cst.BaseExpression = (
            new_base
            if new_rows is None
            else cst.Subscript(value=new_base, slice=new_rows)
        )
        shown = code(new_value)
        how = (
            "each part gathered on its own, so that the parts of every process "
            "are joined as the original's were, not interleaved"
            if parts is not None
            else "the rows of every process, in the original order"
        )
        self.report(
            value,
            "fixed",
            f"`{code(value)}` (line {line}) holds this process's rows of the batch "
            f"-> `{shown}` ({how}, written by the main process)",
        )
        args = list(updated_node.args)
        args[position] = args[position].with_changes(value=new_value)
        return updated_node.with_changes(args=args)

    def _main_process_branch(self, call: cst.Call) -> cst.If | None:
        """The outermost branch that makes ``call`` rank-dependent in its
        function, where it is a test of the main process
        (``accel.is_main_process()``, AM047's, or a second run's): the write's
        own condition is then the same as the original's, and only the
        process that runs it differs."""
        divergent = self.index.divergence.divergent
        outermost: cst.CSTNode | None = None
        for ancestor in self.index.ancestors(call):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if ancestor in divergent:
                outermost = ancestor
        branch = self.index.parent(outermost) if outermost is not None else None
        if (
            isinstance(branch, cst.If)
            and outermost is branch.body
            and any(
                self.index.is_runtime_call(c, *MAIN_PROCESS_TESTS)
                for c in (branch.test, *findall(branch.test, m.Call()))
            )
            and self.index.divergence.uniform(branch)
        ):
            return branch
        return None

    def _gather_parts(
        self, joined: cst.BaseExpression, count: int
    ) -> cst.BaseExpression | None:
        """``torch.cat((a, b), 0)`` -> ``torch.cat((accel.gather(a),
        accel.gather(b)), 0)``."""
        if not isinstance(joined, cst.Call) or not joined.args:
            return None
        first = joined.args[0].value
        if not isinstance(first, (cst.Tuple, cst.List)) or len(first.elements) != count:
            return None
        elements = [
            e.with_changes(
                value=self.runtime_call("gather", [cst.Arg(value=_bare(e.value))])
            )
            for e in first.elements
        ]
        args = list(joined.args)
        args[0] = args[0].with_changes(value=first.with_changes(elements=elements))
        return joined.with_changes(args=args)

    def _saved_position(self, call: cst.Call) -> int | None:
        """Where the saved tensor is among the call's arguments: ``accel.save(x,
        path)``, ``accel.on_main_process(save_image, x, path)``."""
        args = call.args
        if any(a.star for a in args):
            return None
        if self.index.is_runtime_call(call, "save"):
            return 0 if args and args[0].keyword is None else None
        if self.index.is_runtime_call(call, "on_main_process"):
            if len(args) < 2 or args[0].keyword or args[1].keyword:
                return None
            if self.index.qualnames(args[0].value) & _SAMPLE_WRITERS:
                return 1
        return None

    def _gathers(self, value: cst.BaseExpression) -> bool:
        return any(
            self.index.is_runtime_call(c, "gather", "gather_in_order")
            for c in findall(value, m.Call())
        )

    def _loop(self, call: cst.Call) -> LoaderLoop | None:
        """The loop over a prepared loader that the write is in (in its function)."""
        for ancestor in self.index.ancestors(call):
            if isinstance(ancestor, cst.For):
                found = loader_loop(self.index, ancestor)
                if found is not None:
                    return found
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
        return None

    def _untraced_loop(self, call: cst.Call) -> cst.For | None:
        """The loop the write is in (in its function) that the index reads as a
        loop over a data loader whose values ``_loop`` could not all trace to
        prepared DataLoader calls (``for data, label in tr_loader`` in a
        method whose ``tr_loader`` is also handed on by a wrapper method that
        nothing in the file calls)."""
        for ancestor in self.index.ancestors(call):
            if (
                isinstance(ancestor, cst.For)
                and self.index.loader_loop(ancestor.iter)[0]
            ):
                return ancestor
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
        return None

    def _refuse(
        self, value: cst.BaseExpression, line: int, why: str, differs: str
    ) -> None:
        self.report(
            value,
            "needs-review",
            f"`{code(value)}` (line {line}) is written by the main process only: "
            f"{why}; {differs}. Gather the tensor from "
            "every process (accel.gather(x), on every process, before the write) "
            "where all of them reach it, then take the rows to keep",
            if_migrated=True,
        )


def _row_slice(
    value: cst.BaseExpression,
) -> tuple[cst.BaseExpression, tuple[cst.SubscriptElement, ...] | None]:
    """``x[:25]`` -> (``x``, its slice): rows kept off the saved tensor."""
    if (
        isinstance(value, cst.Subscript)
        and len(value.slice) == 1
        and isinstance(value.slice[0].slice, cst.Slice)
        and value.slice[0].slice.step is None
    ):
        return value.value, tuple(value.slice)
    return value, None


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=(), rpar=()) if node.lpar else node
