"""Which sharded loaders' batches a loss is computed from.

``accel.backward`` weighs a mean over this process's batch by its share of
the global batch. When passes over several sharded loaders have yielded since
the last backward with different shares (FixMatch's labelled and unlabelled
loaders, one's last batch short), one weight cannot make the loss global,
unless the loss reads only one of those batches: Reptile's evaluation takes
``next(test_iter)`` of a generator left open, and the next step's loss is
computed from the training loader's batch alone.

So each forward of a prepared model claims the batches yielded since the
forward before it (a forward under ``torch.no_grad()`` claims them too: an
evaluation's batch is not the next forward's), and for each pass the autograd
nodes of the outputs of the last forward that claimed its batch are kept (the
nodes, not the outputs: the loss keeps the nodes alive, not the outputs; one
forward's graph a pass at most, until the next backward or the pass's end).
Only where the shares differ (the rare path) does the backward walk the
loss's autograd graph to those nodes: the passes whose nodes it reaches are
the ones the loss is computed from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch


class ShareClaims:
    def __init__(self) -> None:
        #: Passes that yielded a batch since the last forward of a prepared model.
        self.unclaimed: set[int] = set()
        #: Per pass: the output nodes of the last forward that claimed its batch.
        self.nodes: dict[int, list[Any]] = {}

    def yielded(self, source: int) -> None:
        self.unclaimed.add(source)

    def ended(self, source: int) -> None:
        self.unclaimed.discard(source)
        self.nodes.pop(source, None)

    def forward(self, output: Any) -> None:
        """A prepared model's forward returned ``output``: it claims the batches."""
        if not self.unclaimed:
            return
        claimed, self.unclaimed = self.unclaimed, set()
        nodes = (
            [t.grad_fn for t in _tensors(output, 0) if t.grad_fn is not None]
            if torch.is_grad_enabled()
            else []
        )
        for source in claimed:
            if nodes:
                self.nodes[source] = nodes
            else:
                self.nodes.pop(source, None)

    def backward_done(self) -> None:
        self.nodes.clear()

    def reached(self, losses: Sequence[torch.Tensor]) -> set[int]:
        """The passes whose batches the forwards that ``losses`` reach claimed."""
        kept = []  # alive while their ids are compared
        seen: set[int] = set()
        stack = [loss.grad_fn for loss in losses if loss.grad_fn is not None]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            kept.append(node)
            stack.extend(n for n, _ in node.next_functions if n is not None)
        return {
            source
            for source, nodes in self.nodes.items()
            if any(id(node) in seen for node in nodes)
        }


def _tensors(value: Any, depth: int) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 8 and isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item, depth + 1)
    elif depth < 8 and isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item, depth + 1)
