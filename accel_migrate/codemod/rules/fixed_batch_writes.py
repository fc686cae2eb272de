"""AM041 fixed-batch-writes: a file written from a batch taken once off a sharded loader holds one process's share of it.

## What
Reports, as needs-review, a batch the script takes once from a data loader it
shards, outside a loop over that loader, that a call writes to a file
(``torchvision.utils.save_image``, ``torch.save``, ``numpy.save`` / ``savez`` /
``savetxt``, a TensorBoard writer's ``add_image`` / ``add_images`` /
``add_video`` / ``add_figure`` / ``add_embedding``, ``wandb.log``, MLflow, a
local module's helper that writes): ``fixed_x, _ = next(iter(test_loader))``,
``x_fixed, c_org = next(data_iter)`` with ``data_iter = iter(loader)``, or
``self.x_fixed, c_org = next(iter(self.loader))`` kept on a solver class (GAN,
VAE and segmentation scripts that save the reconstructions or translations of a
fixed batch every epoch). The batch is followed through assignments (``recon =
model(fixed_x)``, ``grid = torch.cat([fixed_x, recon])``), ``self.`` attributes
and the parameters of the file's functions (``sample(G, fixed_x, epoch)``); the
batches and what holds them are one fact of the module (``fixed_batches.py``),
which AM006 asks too. One finding a batch, at the ``next(...)`` that takes it,
names every write it reaches (AM006 then says nothing of that batch). Nothing is
rewritten.

## Why
``accel.prepare_dataloader`` gives each process its share of every batch: the
first batch's first rows on the main process. A batch taken once with
``next(...)`` is that share, so the images or tensors the main process saves of
it (AM010 and AM017 write them there) show only its rows, where the original's
file showed the whole batch. Training is not changed, and nothing fails.

## Example
```python
# before
fixed_x, _ = next(iter(test_loader))
for epoch in range(epochs):
    ...
    save_image(model(fixed_x), f"recon_{epoch}.png")
# after
fixed_x, _ = next(iter(test_loader))
# AM041 [needs-review] `fixed_x, _` is taken once with `next(iter(test_loader))`
# from `test_loader`, a loader that is sharded, and written to a file:
# `save_image(...)` writes `fixed_x` into `f"recon_{epoch}.png"` (line 5). ...
for epoch in range(epochs):
    ...
    accel.on_main_process(save_image, model(fixed_x), f"recon_{epoch}.png")  # AM017
```

## Fix safety
Report only: the fixed batch may also be trained on or evaluated, where its
share is right. To keep the saved file the original's, take the fixed batch
from the dataset itself, which is not sharded (``fixed_x =
torch.stack([test_set[i][0] for i in range(batch_size)])``), or gather it
(``accel.gather``) before it is saved.
"""

from __future__ import annotations

import libcst as cst

from ..file_changes import PATH_WRITERS, argument, written_path
from ..fixed_batches import FixedBatch, FixedWrite, fixed_batches
from ..names import SAVES
from ..rule import Rule

#: Writes named in a finding; more are counted.
_WRITES_SHOWN = 3


class FixedBatchWrites(Rule):
    code = "AM041"
    name = "fixed-batch-writes"
    summary = (
        "a file written from a batch taken once off a sharded loader "
        "(`fixed_x = next(iter(loader))`) -> reported (it holds the main "
        "process's share of the batch)"
    )
    #: Before AM010 and AM017 rewrite the writes it looks for.
    phase = 40

    def applies(self) -> bool:
        # A fixed batch is a `next(...)` call (`fixed_batches`).
        return self.originally_calls({"builtins.next"})

    def visit_Module(self, node: cst.Module) -> None:
        fact = fixed_batches(self.index)
        for batch in fact.batches.values():
            written = fact.written(batch)
            if written:
                self._report(batch, written)

    def _report(self, batch: FixedBatch, written: list[FixedWrite]) -> None:
        """One finding a batch, at the ``next(...)`` that takes it (where the fix
        goes), naming the writes it reaches."""
        shown = "; ".join(self._write(w) for w in written[:_WRITES_SHOWN])
        more = len(written) - _WRITES_SHOWN
        if more > 0:
            shown += f"; and {more} more"
        files = "the files show" if len(written) > 1 else "the file shows"
        self.report(
            batch.taken,
            "needs-review",
            f"{batch.into} is taken once with `{_code(batch.taken)}` from "
            f"`{_code(batch.loader)}`, a loader that is sharded, and written to a "
            f"file: {shown}. On the main process, which writes, it holds only that "
            "process's share of the batch (its first rows), so "
            f"{files} those rows where the original's showed the whole batch "
            "(rows sliced off its start, `x[:8]`, are the original's only while "
            "the share holds them), and what else is computed from it is the "
            "share's too; take the fixed batch from the dataset itself, which is "
            "not sharded (torch.stack([dataset[i][0] for i in range(n)])), or "
            "gather it (accel.gather) before it is used",
            # Of a file another rule leaves whole, nothing is sharded: not said.
            if_migrated=True,
        )

    def _write(self, write: FixedWrite) -> str:
        """``save_image(...)` writes `grid` into `path` (line 23)``."""
        path = self._path(write.call)
        into = f" into `{_code(path)}`" if path is not None else ""
        return (
            f"`{_code(write.call.func)}(...)` writes `{_code(write.leaf)}`{into} "
            f"(line {self.original_line(write.call)})"
        )

    def _path(self, call: cst.Call) -> cst.BaseExpression | None:
        """The file a write names (``save_image(x, path)``, ``torch.save(x, path)``)."""
        names = self.index.qualnames(call.func)
        for writer in sorted(names & PATH_WRITERS.keys()):
            return written_path(call, writer)
        if names & SAVES:
            return argument(call, 1, "f")
        return None


def _code(node: cst.CSTNode) -> str:
    text = cst.Module([]).code_for_node(node)
    return text if len(text) <= 60 else text[:57] + "..."
