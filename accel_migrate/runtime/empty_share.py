"""Zero gradients, not NaN ones, from a rank whose share of the batch holds nothing.

A rank's share of a global batch can hold nothing a mean averages over: every
token of its rows masked, or no rows at all of a short last batch. Its loss is
then 0/0 and weighs nothing (``accel.backward`` multiplies it by zero), but a
masked mean's backward still divides by the zero count, ``(l * m).sum() /
m.sum()``, and ``0 * inf`` leaves NaN in every gradient. The gradient exchange
would then spread it to every rank, where the original script, whose global
batch had tokens, trained on.

This rank's part of the global loss is exactly zero, so is its gradient. The
prepared model's outputs carry a hook that passes a zero gradient on while such
a backward runs, so every parameter still gets its (zero) gradient through the
strategy's own hooks (DDP buckets, FSDP reduce-scatter) and every rank takes
part in the exchange. When no rank has anything, the original's loss was 0/0
too: that gradient is left as it comes, NaN included.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from ._state import Runtime


def gate_outputs(output: Any, runtime: Runtime) -> None:
    """Hook every tensor of a forward's output that gradients flow back through."""

    def gate(grad: torch.Tensor) -> torch.Tensor | None:
        return torch.zeros_like(grad) if runtime.empty_share_backward else None

    for tensor in output_tensors(output):
        if tensor.requires_grad:
            tensor.register_hook(gate)


@contextmanager
def empty_share_backward(runtime: Runtime, empty: bool) -> Iterator[None]:
    """Run a backward with the output gates closed when this rank's share is empty."""
    previous = runtime.empty_share_backward
    runtime.empty_share_backward = empty
    try:
        yield
    finally:
        runtime.empty_share_backward = previous


def output_tensors(value: Any, depth: int = 0) -> Iterator[torch.Tensor]:
    """The tensors of a forward's output: tensors, or tuples/lists/mappings of
    them (HF ModelOutput is a dict), 8 levels deep at most (also the DDP
    strategy's watch of the outputs a backward uses)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth < 8 and isinstance(value, (tuple, list)):
        for item in value:
            yield from output_tensors(item, depth + 1)
    elif depth < 8 and isinstance(value, Mapping):
        for item in value.values():
            yield from output_tensors(item, depth + 1)
