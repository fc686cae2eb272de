"""Peak live tensor bytes per rank of a 12-block model trained a few steps.

    python model_state_peak.py plain REPORT.json          # the original, one process
    accel-migrate launch ... model_state_peak.py runtime REPORT.json

The model: an input layer, 12 residual MLP blocks (LayerNorm, 256 -> 1024 ->
256) in an ``nn.ModuleList``, a head; 6.3 M parameters, 2.0 MiB of fp32
parameters per block; Adam. The batch is 4 rows (2 per rank at world 2), so
activations are a few KiB and the peak is model state: parameters, gradients,
optimizer state and FSDP's gathered parameters and unsharded gradients.

CPU RSS cannot show this (the allocator keeps freed pages), so a
``TorchDispatchMode`` counts the bytes of every tensor storage alive after each
operator (storages found through the operator's outputs, inner tensors of
DTensors included; a storage is counted until it is freed, at its current size,
so FSDP's ``resize_(0)`` of a freed unsharded parameter counts as freed). The
mode is entered before the model is built. Where CUDA is used,
``torch.cuda.max_memory_allocated`` is recorded too.

Writes, per rank (``.rank<N>`` before the suffix under a launcher): ``peak`` and
``resident`` (live bytes after the last step) of the tracker, ``block`` (one
block's parameter bytes), ``units`` (FSDP units), ``cuda_peak``.
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    is_traceable_wrapper_subclass,
)
from torch.utils._pytree import tree_flatten

MODE, REPORT = sys.argv[1], Path(sys.argv[2])
WIDTH, BLOCKS, STEPS, BATCH = 256, 12, 3, 4


class LiveBytes(TorchDispatchMode):
    """The bytes of tensor storages alive, sampled after every operator."""

    def __init__(self) -> None:
        super().__init__()
        self._storages: dict[int, weakref.ref[torch.UntypedStorage]] = {}
        self.peak = 0

    def _storages_of(self, tensor: torch.Tensor) -> list[torch.UntypedStorage]:
        if is_traceable_wrapper_subclass(tensor):
            names, _ = tensor.__tensor_flatten__()
            inner = [getattr(tensor, n) for n in names]
            return [
                s
                for t in inner
                if isinstance(t, torch.Tensor)
                for s in self._storages_of(t)
            ]
        return [tensor.untyped_storage()]

    def track(self, value: Any) -> None:
        for leaf in tree_flatten(value)[0]:
            if not isinstance(leaf, torch.Tensor) or leaf.is_meta:
                continue
            for storage in self._storages_of(leaf):
                key = storage._cdata
                if key not in self._storages:
                    self._storages[key] = weakref.ref(
                        storage, lambda _, key=key: self._storages.pop(key, None)
                    )

    def live(self) -> int:
        return sum(s.nbytes() for ref in list(self._storages.values()) if (s := ref()))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        self.track(out)
        self.track(args)  # in-place ops and collectives write into these
        self.peak = max(self.peak, self.live())
        return out


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.fc1 = nn.Linear(WIDTH, 4 * WIDTH)
        self.fc2 = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(32, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> None:
    runtime = MODE == "runtime"
    if runtime:
        import accel_migrate.runtime as accel

        device = accel.device()
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    data = torch.randn(BATCH * STEPS, 32)
    target = torch.randint(0, 10, (BATCH * STEPS,))
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(data, target), batch_size=BATCH
    )
    tracker = LiveBytes()
    with tracker:
        model = Net().to(device)
        block = sum(p.numel() * p.element_size() for p in model.blocks[0].parameters())
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        if runtime:
            model = accel.prepare_model(model)
            optimizer = accel.prepare_optimizer(optimizer)
            loader = accel.prepare_dataloader(loader)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            if runtime:
                accel.backward(loss)
            else:
                loss.backward()
            optimizer.step()
        resident = tracker.live()
    units = 0
    if runtime and "torch.distributed.fsdp" in sys.modules:
        from torch.distributed.fsdp import FSDPModule

        units = sum(isinstance(m, FSDPModule) for m in accel.unwrap(model).modules())
    rank = int(os.environ.get("RANK", "0"))
    path = REPORT
    if "WORLD_SIZE" in os.environ:
        path = REPORT.with_name(f"{REPORT.stem}.rank{rank}{REPORT.suffix}")
    path.write_text(
        json.dumps(
            {
                "rank": rank,
                "peak": tracker.peak,
                "resident": resident,
                "block": block,
                "units": units,
                "cuda_peak": (
                    torch.cuda.max_memory_allocated(device)
                    if device.type == "cuda"
                    else None
                ),
            }
        )
    )


main()
