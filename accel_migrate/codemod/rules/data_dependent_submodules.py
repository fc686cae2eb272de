"""AM039 data-dependent-submodules: a trained model whose forward runs a submodule only when its batch says so stops the migration.

## What
Reports, as needs-review, and leaves the file unchanged: a branch in the
``forward`` of a model class defined in the file (or in a method ``forward``
calls on ``self``, of a class a training step runs) whose condition depends on
the values of the batch and which decides whether a submodule runs: the
mixture-of-experts layer that skips an expert no sample picks (``if
idx.numel() == 0: continue`` before ``expert(x[idx])``), a stage run only ``if
(x.abs() > t).any():``, a ``while`` loop of adaptive computation on halting
scores, a BatchNorm applied only ``if h.size(0) > 1`` (the batch's row count,
which is each process's share after migration). The same holds for a model
class of another module of the project (``from models import CascadeNet``,
also through a function that returns one, and through the classes of the
project it builds): the finding is at the call that builds it, in a file that
shards a loader (``codemod/project_data_branches.py``). Not a branch on the
batch's other sizes (``x.size(1)``, ``x.dim()``), on
whether an argument was given (``mask is not None``), on the model's own
attributes (``self.training``), on a parameter with a default (a flag the
caller passes, ``forward(x, with_aux=False)``), or on a parameter of a method
that every call of it on ``self`` passes a literal (``self.apply_embedding(x,
static, apply_masking=True)``): those are the same on every process (see
``codemod/data_branches.py``).

## Why
After migration each process runs the model on its share of the batch, and
decides the branch on that share. One process may then run a submodule in a
step and another not. DDP reduces gradients in buckets: the process that used
every parameter waits in its backward for the others' buckets, and one that
left a parameter unused never sends them, so the job aborts in a mismatched
collective or hangs (a model whose unused parameters are the same on every
process, an auxiliary head used every other step, is handled by the runtime).
Where the condition is a statistic of the whole batch, each process's decision
may also differ from the original's.

## Example
```python
# before
class MoE(nn.Module):
    def forward(self, x):
        gate, route = F.softmax(self.router(x), -1).max(-1)
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            idx = (route == i).nonzero(as_tuple=True)[0]
            if idx.numel() == 0:
                continue
            out[idx] = expert(x[idx]) * gate[idx].unsqueeze(-1)
        return x + out
# after
# (unchanged) AM039 [needs-review] `MoE.forward` skips a submodule call when
# `idx.numel() == 0` ... the file is left unchanged
```

## Fix safety
This rule never rewrites. Every process must run the same submodules in each
step: run every submodule on every step (an expert on an empty selection of
rows gives an empty output and a zero gradient), or add the skipped
submodule's output with a zero weight to the loss. Where the condition is the
same on every process for a reason the analysis does not see, the finding can be
left with ``# accel-migrate: skip[AM039]`` on the branch.
"""

from __future__ import annotations

import libcst as cst

from ..data_branches import data_branches
from ..model_methods import forward_methods, stepped_classes
from ..project_data_branches import describe
from ..rule import Rule


class DataDependentSubmodules(Rule):
    code = "AM039"
    name = "data-dependent-submodules"
    summary = (
        "a trained model's forward that runs a submodule only when its batch says "
        "so -> file left unchanged (processes would run different submodules)"
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node not in stepped_classes(self.index):
            return
        for method in forward_methods(node):
            for branch in data_branches(method, node):
                where = f"`{node.name.value}.{method.name.value}`"
                self.block(branch.node, _message(describe(branch, where)))

    def visit_Call(self, node: cst.Call) -> None:
        """A model built from a class of another module of the project
        (``CascadeNet(...)``, ``build_model(cfg)`` returning one), whose
        ``forward`` branches so (``HelperFact.data_branch``), in a file that
        shards a loader."""
        fact = self.index.helper(node.func)
        if fact is None or fact.returns != "model" or not self.index.loaders:
            return
        built = fact if fact.kind == "class" else fact.model_class
        if built is None or not built.data_branch:
            return
        self.block(node, f"builds {built.where}: " + _message(built.data_branch))


def _message(decides: str) -> str:
    return (
        f"{decides}, a condition on its batch "
        "(its values or its row count): after migration each process decides it on its own "
        "share, so in one step some processes can run that submodule and others "
        "not, and DDP's gradient exchange then aborts or hangs (the decision may "
        "also differ from the original's over the whole batch); the file is left "
        "unchanged: run the same submodules on every step (an expert on an empty "
        "selection of rows), or skip this finding where the condition is the same "
        "on every process"
    )
