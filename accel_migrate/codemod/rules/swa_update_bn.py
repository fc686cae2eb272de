"""AM038 swa-update-bn: ``swa_utils.update_bn`` recomputes BatchNorm statistics of the global batch.

## What
``torch.optim.swa_utils.update_bn(loader, swa_model)`` becomes
``accel.update_bn(loader, swa_model)``, with the same arguments. A call that
not every process reaches (under ``if accel.is_main_process():``) is left as it
is and reported as needs-review.

## Why
``update_bn`` resets the running statistics of the averaged model's BatchNorm
layers and runs the model over the loader in train mode to average them again.
After migration the loader is sharded, and the averaged model is a copy made
before training (``AveragedModel(model)``), whose BatchNorm is torch's own: each
process would average the statistics of its share of each batch, and the model
saved or evaluated with them differs from the original's. ``accel.update_bn``
makes the copy's BatchNorm layers normalise by the global batch first, as the
runtime does for a prepared model, so the statistics are the original's
(``docs/runtime.md``); on one process, or over a loader that is not sharded,
it is torch's own.

## Example
```python
# before
swa_model = AveragedModel(model)
...
torch.optim.swa_utils.update_bn(train_loader, swa_model)
# after
swa_model = AveragedModel(model)
...
accel.update_bn(train_loader, swa_model)
```

## Fix safety
Safe: the runtime's function calls torch's with the same arguments; it only
converts the model's BatchNorm layers before, where the loader is one it
shards. The conversion is a collective in every forward, which is why a call
that only some processes reach is left alone.
"""

from __future__ import annotations

import libcst as cst

from ..file_tests import collective_note
from ..rule import Rule

_UPDATE_BN = frozenset({"torch.optim.swa_utils.update_bn"})


class SwaUpdateBn(Rule):
    code = "AM038"
    name = "swa-update-bn"
    summary = (
        "swa_utils.update_bn(loader, swa_model) -> accel.update_bn(loader, "
        "swa_model) (BatchNorm statistics of the global batch)"
    )

    def applies(self) -> bool:
        return self.originally_calls(_UPDATE_BN)  # all it rewrites is update_bn

    def leave_Call(
        self, original_node: cst.Call, updated_node: cst.Call
    ) -> cst.BaseExpression:
        if not self.qualnames(original_node.func) & _UPDATE_BN:
            return updated_node
        if not self.index.uniform(original_node):
            self.report(
                original_node,
                "needs-review",
                "update_bn() where only some processes go: left as torch's, it "
                "averages the BatchNorm statistics of this process's share of the "
                "loader, not the original's; accel.update_bn would wait, in every "
                "forward, for processes that do not run it. Call it where every "
                "process does" + collective_note(self, original_node),
                if_migrated=True,
            )
            return updated_node
        self.report(
            original_node,
            "fixed",
            "update_bn -> accel.update_bn (BatchNorm statistics of the global "
            "batch, as the original's)",
        )
        return updated_node.with_changes(func=self.runtime_attr("update_bn"))
