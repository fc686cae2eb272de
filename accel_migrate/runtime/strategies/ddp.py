"""Data parallel: every rank holds the whole model; gradients are averaged."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from .base import Strategy


class DDPStrategy(Strategy):
    name = "ddp"

    def setup_module(self, module: nn.Module) -> nn.Module:
        if not any(p.requires_grad for p in module.parameters()):
            # A frozen model (a teacher, an EMA copy) has no gradient to average;
            # DDP refuses it. Still start every rank from rank 0's weights.
            _broadcast(module)
            return module
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(module, device_ids=device_ids)

    @contextmanager
    def no_sync(self, forward_module: nn.Module | None) -> Iterator[None]:
        if isinstance(forward_module, DistributedDataParallel):
            with forward_module.no_sync():
                yield
        else:
            yield


def _broadcast(module: nn.Module) -> None:
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            dist.broadcast(tensor.data, src=0)
