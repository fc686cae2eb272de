"""AM006 prepare-dataloader: DataLoaders are wrapped by ``accel.prepare_dataloader(...)``.

## What
Wraps every construction of ``torch.utils.data.DataLoader``, whatever the import
spelling (``from torch.utils.data import DataLoader as DL`` included), for
training and evaluation loaders alike. A loader built in a local module the
script imports (``test_loader = utils.get_test_dataloader()``, known from the
project view) is wrapped where it is called: the module itself is not written.
A sharded loader passed to such a module's function (``utils.evaluate(net,
test_loader)``) is reported as needs-review: what that function sums over it is
this process's share, and nothing there reduces it.

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
Unwrapped, every process reads all of it, and no other rule combines sums over it
across processes.

```python
# left as it is, with a needs-review finding
stream = DataLoader(TokenStream(files), batch_size=32)  # class TokenStream(IterableDataset)
```
"""

from __future__ import annotations

import libcst as cst

from ..helper_effects import loader_passed_to_helper
from ..patterns import DATALOADER_CALLS
from ..rule import Rule
from ..unshardable import unshardable_reason


class PrepareDataloader(Rule):
    code = "AM006"
    name = "prepare-dataloader"
    summary = "DataLoader(...) -> accel.prepare_dataloader(DataLoader(...))"

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        helper = self.index.helper(original_node.func, "loader")
        if helper is None and not self.is_call_to(original_node, DATALOADER_CALLS):
            passed = loader_passed_to_helper(self.index, original_node)
            if passed is not None:
                self.report(original_node, "needs-review", passed)
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
        self.report(
            original_node, "fixed", "DataLoader -> accel.prepare_dataloader(...)"
        )
        return self.runtime_call("prepare_dataloader", [cst.Arg(value=updated_node)])
