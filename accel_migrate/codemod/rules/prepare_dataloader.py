"""AM006 prepare-dataloader: DataLoaders are wrapped by ``accel.prepare_dataloader(...)``.

## What
Wraps every construction of ``torch.utils.data.DataLoader``, whatever the import
spelling (``from torch.utils.data import DataLoader as DL`` included), for
training and evaluation loaders alike. A loader built in a local module the
script imports (``test_loader = utils.get_test_dataloader()``, known from the
project view) is wrapped where it is called: the module itself is not written.
Such a function returning a tuple of loaders (``return train_loader,
val_loader``) is prepared where the tuple is unpacked into one name each:
``train_loader, val_loader = map(accel.prepare_dataloader, get_loaders(args))``.
One returning a dict of loaders (``return {"train": ..., "valid": ...}``) is
prepared where the dict is kept in one variable: ``loaders = {key:
accel.prepare_dataloader(loader) for key, loader in get_iterators(bs).items()}``,
the same keys in the same order, and ``loaders["valid"]`` is a loader for the
other rules. A tuple whose other items are ``None``, numbers or datasets
(a torch or torchvision dataset, or a class or function of the helper's module
that builds one; pytorch-deeplab-xception's ``train_loader, val_loader, test_loader, nclass =
make_data_loader(args)``, ``test_loader = None``) becomes
``accel.prepare_dataloaders(make_data_loader(args))``: each DataLoader of it
prepared, the other items handed back as they are. The function is followed
through the project functions that hand its value back (``load_data(args)``:
``return load_mnist(args)``). A tuple kept whole (``loaders =
get_loaders(args)``), a dict used without a variable, or loaders mixed with
other values cannot be prepared at the call, and the file is left unchanged with a needs-review finding (all or nothing: sharded data is never
paired with an unsharded setup or the reverse). Loaders built by functions of
this file are wrapped where they are built, and the variables their returns
reach (also through ``a, b = f()``) are loaders for the other rules (AM009
reduces the sums over them).
A sharded loader passed to such a module's function (``utils.evaluate(net,
test_loader)``) is reported as needs-review: what that function sums over it is
this process's share, and nothing there reduces it.
A batch taken once out of a sharded loader outside the training step, and not
trained on by the statements after it (``fixed_images, _ =
next(iter(test_loader))`` to reconstruct the same images every epoch;
``x_fixed = next(data_iter)`` after ``data_iter = iter(loader)``), is reported
as needs-review too: it holds this process's share of that batch, so the
samples, images or probe losses computed from it are the main process's
share's. Such batches are one fact of the module (``fixed_batches.py``); one
that a file is written from is AM041's finding, which names the files, and
AM006 says nothing more of it (one finding a batch).
A ``next(...)`` in a batch iterator class's ``__next__`` or ``__iter__``
(MCD_DA's ``PairedData``, whose ``__next__`` returns ``next(self.data_loader_A_iter)``
and ``next(self.data_loader_B_iter)`` together) is drawn at every step, not
once: the needs-review finding names the wrapper, says that each batch it
yields holds this process's share of the original's, and that what reads its
batches (a test such as ``if x.size(0) < batch_size: break``) is not followed
through the class.

## Why
Every process must see its own share of the data. By default the runtime keeps
the original global batch and gives each process its slice of every batch, so
the number of steps per epoch and the samples in each step are those of the
original script: the loss curve stays the same. Evaluation loaders are sharded
too (see AM009 for how their sums are combined), with no sample counted twice.

## Example
```python
# before
train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=2)
# after
train_loader = accel.prepare_dataloader(DataLoader(train_set, batch_size=64, shuffle=True, num_workers=2))
```

```python
# the loaders are prepared; a needs-review finding at the next(...) in __next__:
# each pair it yields holds this process's share of the original batch
class PairedData:
    def __next__(self):
        A = next(self.data_loader_A_iter)
        B = next(self.data_loader_B_iter)
        return {"S": A, "T": B}
```

## Fix safety
Safe for map-style datasets (``__getitem__`` and ``__len__``); the shuffled order
is the one the original script would have drawn, even when processes' random
states drift apart. ``len(loader)`` and ``loader.dataset`` keep their original
meaning.

A loader the runtime cannot shard is left unwrapped and reported needs-review,
never fixed: one over an ``IterableDataset`` (a class of the file deriving from
it, torch's ``ChainDataset`` and iterable datapipes, torchtext's datasets,
``webdataset``, ``load_dataset(..., streaming=True)``), whose samples have no
index to split by, and one with ``batch_size=None``, which yields single samples.
The runtime would stop such a loader at its first use on several processes.

A loader whose batches must not be split is left unwrapped too, and reported
needs-review (``unsplit_loaders.py``): one of batch size 1 (``batch_size=1`` or
none given), where all processes but one would get an empty batch, and one an
evaluation loop ranks the samples of each batch of (``pred =
np.argmax(output)`` over an N-way trial, a candidate list's ``topk``), where
each process would rank only its share (AM009's finding). Every process reads
all of it in its fixed order, as the original did, and nothing computed over
it is combined across processes. One of batch size 1 that may shuffle
(``shuffle=True``, a ``sampler=``) is wrapped, since each process could draw
its own order, and reported: at N processes its global batch of 1 cannot be
split, so the runtime stops it at its first batch (``BatchSmallerThanWorldError``)
unless the batch mode is ``per-device`` (``accel-migrate launch --batch-mode
per-device``), where each process draws its own sample a step: a global batch
of N, so the losses differ from the original's (the finding says so). A
batch size read from a command-line option of ``default=1`` (PyTorch-GAN's
cyclegan.py: ``batch_size=opt.batch_size``) is reported so too, for its default. One that may
shuffle and whose batches a loop ranks is wrapped and reported too, never
silently (its metric is not the original's; AM009 reports the loop). A loader
in a fixed order every loop over which runs only after a test of the file
system (``if os.path.exists(ckpt):`` around the loop or every call of its
function) is left unwrapped and reported as well: each process tests at its own
moment, and one that tests after the main process has written the file skips
the loop, so a sharded loader there would leave the others waiting for it.

A loader returned by a method that its own file never calls
(Deep-SVDD-PyTorch's ``TorchvisionDataset.loaders()``, taken out by the
trainers of another module through the dataset object they are handed) is
left unprepared, and the whole file with it, with a needs-review finding: its
callers are not followed, and sharding it where it is built would shard it
for a caller whose model is not prepared too.
Unwrapped, every process reads all of it, and no other rule combines sums over it
across processes.

```python
# left as it is, with a needs-review finding
stream = DataLoader(TokenStream(files), batch_size=32)  # class TokenStream(IterableDataset)
```
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from ..fixed_batches import fixed_batches
from ..helper_effects import loader_passed_to_helper
from ..names import DATALOADER_CALLS
from ..patterns import (
    loader_tuple_helper,
    prepared_loader_map,
    prepared_loader_tuple,
)
from ..project_facts import HelperFact
from ..reduction.placement import code
from ..returned_loaders import method_returned_loader
from ..rule import Rule, tidy_args
from ..unshardable import unshardable_reason
from ..unsplit_loaders import one_sample_shuffled, ranked_shuffled

#: The iterator protocol's methods: a ``next(...)`` there is drawn every step.
_PROTOCOL = frozenset({"__next__", "__iter__"})


class PrepareDataloader(Rule):
    code = "AM006"
    name = "prepare-dataloader"
    summary = "DataLoader(...) -> accel.prepare_dataloader(DataLoader(...))"
    prepares = True

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        held = self.index.helper(original_node.func)
        if held is not None and held.container:
            return self._container(original_node, updated_node, held)
        helper = self.index.helper(original_node.func, "loader")
        if helper is None and not self.is_call_to(original_node, DATALOADER_CALLS):
            passed = loader_passed_to_helper(
                self.index, original_node
            ) or self._fixed_batch(original_node)
            if passed is not None:
                self.report(original_node, "needs-review", passed, if_migrated=True)
            return updated_node
        arg = self.parent(original_node)
        if isinstance(arg, cst.Arg) and self.index.is_runtime_call(
            self.parent(arg), "prepare_dataloader"
        ):
            return updated_node
        if helper is not None:
            # The loader is built in a local module (never written): wrapped here.
            if helper.unshardable:
                self.report(
                    original_node,
                    "needs-review",
                    f"{helper.describe()} that cannot be sharded ({helper.unshardable}); "
                    "every process reads all of it",
                    if_migrated=True,
                )
                return updated_node
            self.report(
                original_node,
                "fixed",
                f"{helper.describe()} -> accel.prepare_dataloader(...)",
            )
            return self.runtime_call(
                "prepare_dataloader", [cst.Arg(value=updated_node)]
            )
        reason = unshardable_reason(self.index, original_node)
        if reason is not None:
            self.report(original_node, "needs-review", reason)
            return updated_node
        method = method_returned_loader(self.index, original_node)
        if method is not None:
            self.block(
                original_node,
                f"this DataLoader is returned by `{method}`, which this file never "
                "calls: its callers take it out through an instance, elsewhere, "
                "which the analysis does not follow, so it cannot tell that they "
                "are migrated; sharded here, it would be sharded for every caller, "
                "also one whose model is not prepared (each process would train "
                "its own copy on its share). Nothing of this file is migrated: "
                "prepare the loader with accel.prepare_dataloader(...) where a "
                "caller takes it out, in a file whose training is migrated",
            )
            return updated_node
        shuffled = one_sample_shuffled(self.index, original_node) or ranked_shuffled(
            self.index, original_node
        )
        if shuffled is not None:
            self.report(original_node, "needs-review", shuffled, if_migrated=True)
        else:
            self.report(
                original_node, "fixed", "DataLoader -> accel.prepare_dataloader(...)"
            )
        return self.runtime_call("prepare_dataloader", [cst.Arg(value=updated_node)])

    def _fixed_batch(self, call: cst.Call) -> str | None:
        """The needs-review message for ``call`` when it takes a batch once off a
        sharded loader (``fixed_batches``) that no file is written from: one
        that is written is AM041's, which names the files, once for the batch."""
        fact = fixed_batches(self.index)
        batch = fact.at(call)
        if batch is None or batch.gathered or fact.written(batch):
            return None
        method = self.index.enclosing_function(call)
        owner = self.index.enclosing_class(call)
        if method is not None and owner is not None and method.name.value in _PROTOCOL:
            # MCD_DA's `PairedData.__next__`: `A, A_paths =
            # next(self.data_loader_A_iter)` is drawn at every step, not once
            where = f"{owner.name.value}.{method.name.value}"
            return (
                f"{batch.into} is drawn with `{code(call)}` from "
                f"`{code(batch.loader)}` in `{where}`, a batch iterator over "
                "loaders accel.prepare_dataloader shards: each batch it yields "
                "holds this process's share of the original's (the configured "
                "batch size over the number of processes), and what reads its "
                f"batches is not followed through `{owner.name.value}`: check it "
                "by hand (a test such as `if x.size(0) < batch_size: break` now "
                "ends every epoch at its first batch)"
            )
        return (
            f"{batch.into} is taken once with `{code(call)}` from "
            f"`{code(batch.loader)}`, which accel.prepare_dataloader shards: it "
            "holds this process's share of that batch, so what is computed from "
            "it (sampled or reconstructed images, a probe loss, a data-dependent "
            "initialisation) is the main process's share's where the original "
            "used the whole batch; take it from a DataLoader over the same "
            "dataset that is not prepared, or combine what it yields across "
            "processes"
        )

    def _container(
        self, original: cst.Call, updated: cst.Call, helper: HelperFact
    ) -> cst.BaseExpression:
        """A local module's function returning a tuple (or dict) of loaders: each
        is prepared where the tuple is unpacked into as many names (``a, b =
        map(accel.prepare_dataloader, get_loaders(args))``); any other use leaves
        the file unchanged (its loaders cannot all be prepared here)."""
        arg = self.parent(original)
        if isinstance(arg, cst.Arg) and (
            prepared_loader_map(self.index, self.parent(arg))  # type: ignore[arg-type]
            or prepared_loader_tuple(self.index, self.parent(arg))  # type: ignore[arg-type]
            is original
        ):
            return updated  # prepared already (a second run)
        where = f"{helper.describe()}"
        if helper.unshardable:
            self.block(
                original,
                f"{where}, one of which cannot be sharded ({helper.unshardable}); "
                "its loaders are not prepared, so nothing of this file is migrated",
            )
            return updated
        if helper.container == "dict" and set(helper.items) == {"loader"}:
            return self._loader_dict(original, updated, helper)
        mixed = (
            helper.container == "tuple"
            and set(helper.items) != {"loader"}
            and loader_tuple_helper(self.index, original, mixed=True) is not None
        )
        if not mixed and helper.container == "tuple" and helper.item_reasons:
            # `return DataLoader(train_set, ...), train_set` (a parameter)
            self.block(
                original,
                f"{where}: accel-migrate prepares the loaders of a returned tuple "
                "where every other item is surely no loader (None, a number, a "
                f"dataset), but {'; '.join(helper.item_reasons)}; {helper.file} is "
                "not rewritten, so nothing of this file is migrated (prepare each "
                "loader with accel.prepare_dataloader(...) where it is taken out)",
            )
            return updated
        if not mixed and (
            helper.container != "tuple" or set(helper.items) != {"loader"}
        ):
            shape = (
                "a dict of other values"
                if helper.container == "dict"
                else "a tuple of other values"
            )
            self.block(
                original,
                f"{where}: accel-migrate prepares the loaders a helper returns in a "
                f"tuple it unpacks into one name each or in a dict of loaders, not "
                f"in {shape}, and "
                f"{helper.file} is not rewritten; nothing of this file is migrated "
                "(prepare each loader with accel.prepare_dataloader(...) where it is "
                "taken out)",
            )
            return updated
        statement = self.parent(original)
        targets = statement.targets if isinstance(statement, cst.Assign) else ()
        target = targets[0].target if len(targets) == 1 else None
        if not (
            isinstance(target, (cst.Tuple, cst.List))
            and len(target.elements) == len(helper.items)
            and not any(isinstance(e, cst.StarredElement) for e in target.elements)
        ):
            self.block(
                original,
                f"{where}, not unpacked into one name per loader where it is "
                "called: its loaders cannot be prepared here, and the module is not "
                "rewritten; nothing of this file is migrated (write `a, b = "
                f"{helper.name}(...)`)",
            )
            return updated
        if mixed:
            self.report(
                original,
                "fixed",
                f"{where} -> accel.prepare_dataloaders(...) (each DataLoader of "
                f"it prepared, {helper.plain_items('and')} handed back as they are)",
            )
            return self.runtime_call("prepare_dataloaders", [cst.Arg(value=updated)])
        if self.index.bound_in_module("map"):
            self.block(
                original,
                f"{where}; `map` may not be the builtin in this file (it is bound "
                "here, or a star import may bind it), so they cannot be prepared "
                "with map(accel.prepare_dataloader, ...); nothing of this file is "
                "migrated",
            )
            return updated
        self.report(
            original,
            "fixed",
            f"{where} -> map(accel.prepare_dataloader, ...) (each of them prepared)",
        )
        return cst.Call(
            func=cst.Name("map"),
            args=tidy_args(
                [
                    cst.Arg(value=self.runtime_attr("prepare_dataloader")),
                    cst.Arg(value=updated),
                ]
            ),
        )

    def _loader_dict(
        self, original: cst.Call, updated: cst.Call, helper: HelperFact
    ) -> cst.BaseExpression:
        """``loaders = get_iterators(bs)`` of a function returning a dict of loaders:
        ``loaders = {key: accel.prepare_dataloader(loader) for key, loader in
        get_iterators(bs).items()}``, the same keys in the same order. Only where
        the dict is kept in one variable: the other rules know its items as
        loaders (``loaders["valid"]``) through it."""
        if prepared_loader_dict(self.index, self, original):
            return updated  # prepared already (a second run)
        statement = self.parent(original)
        targets = statement.targets if isinstance(statement, cst.Assign) else ()
        if not (len(targets) == 1 and isinstance(targets[0].target, cst.Name)):
            self.block(
                original,
                f"{helper.describe()}, not kept in one variable where it is called "
                "(`loaders = "
                f"{helper.name}(...)`): its loaders cannot be prepared here, and "
                f"{helper.file} is not rewritten; nothing of this file is migrated",
            )
            return updated
        key, loader = ("key", "loader")
        if self.context.alias in (key, loader):
            key, loader = ("key_", "loader_")
        self.report(
            original,
            "fixed",
            f"{helper.describe()} -> each of them prepared with "
            "accel.prepare_dataloader(...), under the same keys",
        )
        return cst.DictComp(
            key=cst.Name(key),
            value=self.runtime_call("prepare_dataloader", [cst.Arg(cst.Name(loader))]),
            for_in=cst.CompFor(
                target=cst.Tuple(
                    [cst.Element(cst.Name(key)), cst.Element(cst.Name(loader))],
                    lpar=[],
                    rpar=[],
                ),
                iter=cst.Call(
                    func=cst.Attribute(value=updated, attr=cst.Name("items"))
                ),
            ),
        )


def prepared_loader_dict(index: Any, rule: Rule, call: cst.Call) -> bool:
    """Is ``call`` the iterable of AM006's ``{k: accel.prepare_dataloader(v) for
    k, v in call.items()}``?"""
    attribute = rule.parent(call)
    outer = rule.parent(attribute) if attribute is not None else None
    comp_for = rule.parent(outer) if outer is not None else None
    comp = rule.parent(comp_for) if comp_for is not None else None
    return (
        isinstance(attribute, cst.Attribute)
        and attribute.attr.value == "items"
        and isinstance(comp_for, cst.CompFor)
        and isinstance(comp, cst.DictComp)
        and index.is_runtime_call(comp.value, "prepare_dataloader")
    )
