"""AM045 unregistered-tensors: a model that keeps a learnt tensor outside its parameters stops the migration.

## What
Reports, as needs-review, and leaves the file unchanged: a model built from a
class that sets an attribute to a tensor with a gradient of its own that is not
an ``nn.Parameter`` (DARTS's search network: ``self.alphas_normal =
Variable(1e-3 * torch.randn(k, n), requires_grad=True)``, or
``(...).requires_grad_(True)``, handed to an optimizer of their own through
``model.arch_parameters()``), where the file builds it and reads a data loader:
a class of the file, or of another module of the project (``from model_search
import Network``).

## Why
``accel.prepare_model(...)`` averages the gradients of the model's parameters,
the tensors ``model.parameters()`` lists; an attribute that is a plain tensor is
not one of them. Its gradient stays each process's own, computed from its share
of each batch, and the optimizer that steps it makes a different copy on each
process: the architecture (and every loss after the first step) drifts apart
without an error. A training setup is migrated whole or not at all.

## Example
```python
# before
class Network(nn.Module):
    def _initialize_alphas(self):
        self.alphas_normal = (1e-3 * torch.randn(k, num_ops)).requires_grad_(True)

model = Network(C, num_classes, layers, criterion)
# after
# (unchanged) AM045 [needs-review] `Network._initialize_alphas` sets
# `self.alphas_normal` to a tensor with a gradient of its own that is not an
# nn.Parameter ... the file is left unchanged
```

## Fix safety
This rule never rewrites. Register the tensor as a parameter
(``self.alphas_normal = nn.Parameter(1e-3 * torch.randn(k, num_ops))``), keep
it out of the weights' optimizer if it has its own (``[p for n, p in
model.named_parameters() if "alphas" not in n]``), and migrate again. A tensor
set in a module's method but never given a gradient (``requires_grad=False``,
a buffer) is not reported.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from ..index_syntax import ast_class
from ..names import DATALOADER_CALLS
from ..rule import Rule
from ..trained_models import snippet
from ..unregistered_tensors import unregistered_tensors


class UnregisteredTensors(Rule):
    code = "AM045"
    name = "unregistered-tensors"
    summary = (
        "a model whose class keeps a learnt tensor that is not an nn.Parameter "
        "(DARTS's alphas) -> file left unchanged (prepare_model averages "
        "parameters only)"
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self._reads_loader:
            return
        why = self._local(node) or self._imported(node)
        if not why:
            return
        self.block(
            node,
            f"{why}: accel.prepare_model(...) averages the gradients of the "
            "model's parameters only (those `model.parameters()` lists), so that "
            "tensor's gradient would stay each process's own, computed from its "
            "share of each batch, and an optimizer stepping it would make a "
            "different copy on each process; the file is left unchanged: make "
            "it an nn.Parameter of the module (`nn.Parameter(...)`, kept out of "
            "the weights' optimizer if it has its own) and migrate again",
        )

    @cached_property
    def _reads_loader(self) -> bool:
        return any(
            self.index.qualnames(call.func) & DATALOADER_CALLS
            for call in self.index.calls
        )

    def _local(self, node: cst.Call) -> str:
        cls = self.index.local_class(node.func)
        if cls is None or cls not in self.index.local_subclasses(["torch.nn."]):
            return ""
        parsed = ast_class(cls)
        if parsed is None:
            return ""
        offset = self.original_line(cls) - parsed.lineno
        return unregistered_tensors(parsed, offset=offset)

    def _imported(self, node: cst.Call) -> str:
        fact = self.index.helper(node.func)
        if fact is None or fact.returns != "model":
            return ""
        built = fact if fact.kind == "class" else fact.model_class
        if built is None or not built.unregistered_tensors:
            return ""
        return f"`{snippet(node)}` builds {built.where}: {built.unregistered_tensors}"
