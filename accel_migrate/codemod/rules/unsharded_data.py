"""AM019 unsharded-data: a training loop that does not read a data loader trains every process on all the data.

## What
Reports, as needs-review, a loop that runs a backward (directly or through the
script's own functions) and takes its batches out of data made before it,
without a ``DataLoader``: a slice of a tensor or list (``data[i:i + n]``, also
in a function it calls, ``get_batch(train_data, i)``) or an item picked by the
loop's counter (``x[i]``), when neither it nor any loop around it can read a
loader: every one of them is a ``for`` over ``range(...)`` (or
``itertools.count()``, or a literal list, also through ``enumerate`` or
``tqdm``), or a ``while``, that calls no ``next(...)``. A loop over anything else
(a loader, a parameter, a generator) may be reading a loader, and a step that
makes its own data (``torch.randn(...)``) has none to split: neither is
reported; nor is a bare ``:`` that keeps every item of an axis (a PGD attack's
``delta[index, :, :, :]`` of the batch it is handed). Reported too: a ``for`` that runs a backward over a batch iterator
that is not a DataLoader, under no loop that reads one: torchtext's legacy
``BucketIterator`` / ``Iterator`` / ``BPTTIterator``, or an instance of a class
of a local module handed no loader (pytorch/examples snli's iterator with
``init_epoch()``; ``batch_iterators``), also one a function of a local module
returns (Chinese-Text-Classification's ``build_iterator`` returning its
hand-written ``DatasetIterater``, a class with ``__next__``/``__iter__``), or a
generator function of a local module that yields batches it slices out of the
data it is handed (``for x, y in get_batches(x, y, batch_size)``), or builds of
items it indexes out of it (pytorch_nmt's ``data_iter``: ``batch = [data[i] for
i in item_indices]``, then ``zip(*batch)``; not one that
loops over a parameter, which may be a loader), and
in batch mode a parameter that every caller of the batch hands one
(``train(config, model, train_iter, ...)``; ``iterator_factories``): the
finding names the class and its file. Reported too, as work not divided: a
loop of such loops whose step runs a prepared model over data made before the
loop, whole, into the loss it backpropagates (full-batch training: tkipf/pygcn's
``model(features, adj)`` over the whole graph every epoch, the loss over
``idx_train``; ``full_batch``): every process repeats the same forward and
backward, and the result is the original's. Reported too: a step that picks
its batch out of data made before the loop by indices it draws itself
(powerful-gnns' ``selected_idx = np.random.permutation(len(train_graphs))
[:batch_size]``, then ``[train_graphs[idx] for idx in selected_idx]``;
``drawn_batches``): every process draws the same indices, trains on the same
batch, and what the runtime combines over the processes' samples (a
BatchNorm's running variance under its synchronised batch norm) counts each
copy as samples of its own. Reported too, where the file's model is
prepared: a loop that steps through batches of a source no process splits,
once every value its iterable may hold is followed to one
(``unsplit_sources``): a loader held by an object another module builds
(pytorch-center-loss's ``dataset.trainloader`` of ``datasets.create(...)``),
one taken out of a list a helper returns (DKT's ``trainLoaders[i]``, in batch
mode a parameter the batch's callers hand such a list), a generator method of
such an object (LSTNet's ``data.get_batches(X, Y, batch_size, True)``), or,
under loops that read no data, a method of an instance of a helper module's
class handed no loader (SASRec's ``sampler.next_batch()``), and, in batch mode, a loop that
hands its batches to the step of another file's object that trains models
it builds itself (Graph-WaveNet's ``engine.train(trainx, trainy)`` over
``dataloader["train_loader"].get_iterator()``, util.py's own loader class
out of the dict ``load_dataset`` returns). The finding names
the source and its line; each process trains on the whole of every batch, so
the run matches and does the work of one N times over. A parameter whose
callers are not known, or this file's own classes and functions (whose
DataLoaders AM006 wraps), are never reported. Nothing is rewritten.

## Why
The runtime gives each process its share of the data through
``accel.prepare_dataloader`` (AM006). Data that does not go through a loader is
not split: every process trains on all of it, in the same order, so a run on N
processes does the work of one N times over (its gradients are the same on every
process, and so is the result). ``accel.backward`` weighs a loss of a step
that no sharded loader fed by ``1 / N``, so the averaged gradient is the
original's where every process draws the same batches; where an iterator
shuffles from a generator each process seeds otherwise, it is the mean of N
different batches' gradients, and the training differs. Even with the same
batches everywhere, a BatchNorm layer's running variance differs: the runtime's
synchronised batch norm takes the N copies of the batch for a global batch N
times as large, whose unbiased correction is another (the messages say so).

## Example
```python
# before
for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
    data, targets = get_batch(train_data, i)
    loss = criterion(model(data), targets)
    loss.backward()
# after
# (unchanged: reported as needs-review)
for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
    data, targets = get_batch(train_data, i)
    loss = criterion(model(data), targets)
    accel.backward(loss)
```

## Fix safety
Report only. To split such data, wrap it in a ``Dataset`` and a ``DataLoader``,
or take this process's part by hand (``train_data[accel.rank()::accel.world_size()]``,
keeping in mind that the loss is then a mean over a smaller batch).
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst
import libcst.matchers as m

from ..analysis import Key
from ..batch_iterators import unsplit_iterator
from ..drawn_batches import drawn_pick
from ..full_batch import stored_inputs
from ..patterns import prepared_models
from ..rule import Rule
from ..subtrees import findall
from ..unsplit_sources import unsplit_sources

MESSAGE = (
    "the training data is not split across processes: each trains on all of it "
    "(this loop runs a backward on data sliced without a data loader; read it "
    "through a torch.utils.data.DataLoader, or take this process's part with "
    "accel.rank())"
)


#: What differs even where every process gets the same batches: the runtime's
#: synchronised BatchNorm combines the processes' batches as samples of one
#: global batch, so N copies of the same batch count N times in its unbiased
#: running variance (deepspeech.pytorch's BucketingSampler loop: the losses
#: equal, `running_var` not).
_BATCHNORM_COPIES = (
    "; a BatchNorm layer's running variance differs even then (the runtime's "
    "synchronised batch norm counts each process's copy of the batch as samples "
    "of its own in its unbiased correction), and the evaluation with it"
)


def iterator_message(loop: str, made: str) -> str:
    # (a DataLoader subclass of the project is named so by `made` itself)
    plain = (
        "" if "derived from torch's DataLoader" in made else ", not a torch DataLoader"
    )
    return (
        f"the loop over `{loop}` ({made}{plain}) is not split "
        "across processes: every process trains on every batch it yields, so a "
        "run on N processes does the work of one N times over. The losses and "
        "gradients are the original's where it yields the same batches in the "
        "same order on every process (a fixed order, or one shuffled from the "
        "same seed), and differ where each process draws its own order (the "
        f"gradients averaged are then of different batches){_BATCHNORM_COPIES}; "
        "make the batches "
        "with a torch.utils.data.DataLoader (a batch_sampler can keep the "
        "buckets) so that accel.prepare_dataloader splits them, or take this "
        "process's part with accel.rank()"
    )


def source_message(origin: str, line: int, made: str) -> str:
    what = f" {made}" if made else ""
    return (
        f"the training batches are not split across processes: this loop takes "
        f"them from `{origin}` (line {line}){what}, which is not a DataLoader "
        "that accel.prepare_dataloader wraps here, so every process trains on "
        "the whole of every batch. The losses and gradients are the original's "
        "where every process gets the same batches in the same order (the "
        "averaged gradients of equal batches), but a run on N processes does the "
        "work of one N times over, and they differ where each process draws its "
        f"own order{_BATCHNORM_COPIES}. To split it, wrap the loader it comes from where this file "
        "takes it out (`loader = accel.prepare_dataloader(...)` around it, a "
        "torch.utils.data.DataLoader), or make its batches with a DataLoader, "
        "or take this process's part by hand with accel.rank() and "
        "accel.world_size()"
    )


def _whole(part: cst.Slice) -> bool:
    """A bare ``:`` (``delta[index, :, :, :]``): every item of that axis, not a
    part of the data."""
    return part.lower is None and part.upper is None and part.step is None


def _targets(loop: cst.For | cst.While) -> set[str]:
    if not isinstance(loop, cst.For):
        return set()
    return {n.value for n in findall(loop.target, m.Name())}  # type: ignore[attr-defined]


def drawn_message(data: str, draw: str) -> str:
    return (
        f"the training data is not split across processes: each step picks its "
        f"batch out of `{data}` (made before the loop) by indices it draws "
        f"itself (`{draw}`), not through a data loader, so every process draws "
        "the same indices and trains on the same whole batch (a run on N "
        "processes does the work of one N times over). The gradients are the "
        "original's, but what the runtime combines over the processes' samples "
        "counts each process's copy of the batch as samples of its own: a "
        "BatchNorm's running variance (unbiased, with the global count, under "
        "the runtime's synchronised batch norm), and with it the evaluation, "
        "differs from the original's; read the data through a "
        "torch.utils.data.DataLoader (a sampler can draw the batches the same "
        "way) so that accel.prepare_dataloader splits it, or run the script on "
        "one process"
    )


def full_batch_message(model: str, inputs: list[str]) -> str:
    shown = ", ".join(f"`{name}`" for name in inputs)
    return (
        f"the work of this loop is not divided across processes: each step runs "
        f"`{model}` over the whole of {shown}, made before the loop and not read "
        "through a data loader (full-batch training, as on a whole graph), so "
        "every process repeats the same forward and backward over all of it and "
        "a run on N processes does the work of one N times over. "
        "The losses and gradients are the original's where every process computes "
        "the same values (each process's loss is the whole loss, weighed as 1/N "
        "of it, before the gradients are averaged); to divide the work, "
        "split the data into mini-batches read through a "
        "torch.utils.data.DataLoader (accel.prepare_dataloader shards it), or "
        "run the script on one process"
    )


class UnshardedData(Rule):
    code = "AM019"
    name = "unsharded-data"
    summary = "training loop without a data loader -> reported (every process trains on all the data)"

    @cached_property
    def _models(self) -> frozenset[Key]:
        """The models AM004 prepared (the rules before this one have run)."""
        return prepared_models(self.index)

    def visit_Module(self, node: cst.Module) -> None:
        reported: set[cst.CSTNode] = set()
        for call in self.index.calls:
            if not self.index.is_backward_call(call):
                continue
            for path in self.index.loop_paths(call):
                if not path or not all(self.index.reads_no_data(loop) for loop in path):
                    continue  # a loop that reads a loader, or may
                loop = path[0]
                if self._drawn(loop, path, reported):
                    continue
                if not self._reads_stored_data(loop.body, path, 0):
                    # data made in the step (the same on every process), or
                    # data made before it and used whole (full-batch training)
                    self._full_batch(call, loop, reported)
                    continue
                if loop not in reported:
                    reported.add(loop)
                    self.report(loop, "needs-review", MESSAGE)
            self._over_iterator(call, reported)
        self._unsplit_sources(reported)

    def _drawn(
        self,
        loop: cst.For | cst.While,
        path: tuple[cst.For | cst.While, ...],
        reported: set[cst.CSTNode],
    ) -> bool:
        """A step that picks its batch out of stored data by indices it draws
        itself (powerful-gnns' ``[train_graphs[idx] for idx in selected_idx]``;
        ``drawn_batches``): reported once, with what it means."""
        counters = set().union(*(_targets(outer) for outer in path))
        pick = drawn_pick(loop.body, self.qualnames, counters)
        if pick is None:
            return False
        if loop not in reported:
            reported.add(loop)
            draw = cst.Module([]).code_for_node(pick.draw)
            self.report(
                loop, "needs-review", drawn_message(pick.data, draw), if_migrated=True
            )
        return True

    def _full_batch(
        self, backward: cst.Call, loop: cst.For | cst.While, reported: set[cst.CSTNode]
    ) -> None:
        """A step that runs a model over data made before its loop, whole
        (pygcn's ``model(features, adj)`` every epoch; ``full_batch``)."""
        if loop in reported:
            return
        func = backward.func
        loss: cst.BaseExpression | None = None
        if isinstance(func, cst.Attribute) and func.attr.value == "backward":
            loss = func.value
        if loss is None or self.index.is_runtime_call(backward, "backward"):
            # torch.autograd.backward(loss), accel.backward(loss) (AM007's)
            loss = backward.args[0].value if backward.args else None
        if loss is None:
            return
        model, inputs = stored_inputs(self.index, backward, loss, loop, self._models)
        if not inputs:
            return
        reported.add(loop)
        self.report(
            loop,
            "needs-review",
            full_batch_message(model, inputs),
            if_migrated=True,
        )

    def _over_iterator(self, backward: cst.Call, reported: set[cst.CSTNode]) -> None:
        """A backward run by a ``for`` over a batch iterator that is not a
        DataLoader (``batch_iterators``), under no loop that reads a loader."""
        for path in self.index.loop_paths(backward):
            if any(self.index.reads_loader(loop) for loop in path):
                continue
            for loop in path:
                if not isinstance(loop, cst.For) or loop in reported:
                    continue
                made = unsplit_iterator(self.index, loop.iter)
                if made is None:
                    continue
                reported.add(loop)
                self.report(
                    loop,
                    "needs-review",
                    iterator_message(cst.Module([]).code_for_node(loop.iter), made),
                    # Of a file another rule leaves whole, nothing runs on N.
                    if_migrated=True,
                )

    def _unsplit_sources(self, reported: set[cst.CSTNode]) -> None:
        """A loop that runs a backward on batches of a source no process
        splits: a loader this file does not prepare (held by another module's
        object, taken out of a list), a generator method, a sampler's
        ``next_batch()`` (``unsplit_sources``)."""
        for source in unsplit_sources(self.index):
            if source.loop in reported:
                continue
            reported.add(source.loop)
            line = self.context.original_start(self.wrapper, source.origin)[0]
            self.report(
                source.loop,
                "needs-review",
                source_message(
                    cst.Module([]).code_for_node(source.origin), line, source.made
                ),
                if_migrated=True,
            )

    def _reads_stored_data(
        self,
        body: cst.CSTNode,
        path: tuple[cst.For | cst.While, ...],
        depth: int,
    ) -> bool:
        """Does the step take its data out of something made before it: a slice
        (``data[i:i + n]``) or an item picked by a loop counter (``x[i]``) of a
        variable it does not set itself, here or in a function it calls
        (``get_batch(train_data, i)``)?"""
        counters = set().union(*(_targets(loop) for loop in path))
        assigned = {
            n.value  # type: ignore[attr-defined]
            for target in findall(body, m.AssignTarget())
            for n in findall(target, m.Name())  # type: ignore[arg-type]
        }
        for node in findall(body, m.Subscript(value=m.Name())):
            assert isinstance(node, cst.Subscript)
            base = node.value
            assert isinstance(base, cst.Name)
            if base.value in assigned or base.value in counters:
                continue
            for element in node.slice:
                index = element.slice
                if isinstance(index, cst.Slice) and not _whole(index):
                    return True
                if isinstance(index, cst.Index) and any(
                    n.value in counters  # type: ignore[attr-defined]
                    for n in findall(index.value, m.Name())
                ):
                    return True
        if depth >= 2:
            return False
        for call in findall(body, m.Call()):
            target = self.index.callee(call)  # type: ignore[arg-type]
            if target is not None and self._reads_stored_data(
                target[0].body, (), depth + 1
            ):
                return True
        return False
