"""Peak live tensor bytes per rank of a 12-block model trained a few steps.

    python model_state_peak.py plain REPORT.json          # the original, one process
    accel-migrate launch ... model_state_peak.py runtime REPORT.json
    torchrun ... model_state_peak.py hand REPORT.json [--no-reshard] [--no-prefetch]

``hand``: the same loop written by hand for FSDP2, ``fully_shard`` on each block
and then the root (as torchtitan does), plain torch with no runtime;
``--no-reshard``: ``reshard_after_forward=False``; ``--no-prefetch``: no backward
prefetch (FSDP2 has no switch for its default one-block-ahead prefetch in
backward, so ``FSDPParamGroup._backward_prefetch`` is replaced by a no-op here;
torch 2.13's private name, benchmark only).

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

Writes, per rank (``.rank<N>`` before the suffix under a launcher): ``peak``
(the larger of ``setup_peak``, up to the end of the prepare calls or of the
hand-written sharding, and ``training_peak``, in the training loop) and
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

MODE, REPORT, FLAGS = sys.argv[1], Path(sys.argv[2]), set(sys.argv[3:])
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


def hand_sharded(model: Net) -> torch.optim.Optimizer:
    """Per-block ``fully_shard`` as a user writes it, then the optimizer."""
    from torch.distributed.fsdp import fully_shard

    if "--no-prefetch" in FLAGS:
        from torch.distributed.fsdp._fully_shard._fsdp_param_group import (
            FSDPParamGroup,
        )

        FSDPParamGroup._backward_prefetch = lambda self: None  # type: ignore[method-assign]
    reshard = "--no-reshard" not in FLAGS
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    return torch.optim.Adam(model.parameters(), lr=1e-3)


def main() -> None:
    runtime, hand = MODE == "runtime", MODE == "hand"
    world = 1
    if runtime:
        import accel_migrate.runtime as accel

        device = accel.device()
    elif hand:
        import torch.distributed as dist

        cuda = torch.cuda.is_available()
        dist.init_process_group("nccl" if cuda else "gloo")
        world = dist.get_world_size()
        local = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
    else:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    data = torch.randn(BATCH * STEPS, 32)
    target = torch.randint(0, 10, (BATCH * STEPS,))
    dataset = torch.utils.data.TensorDataset(data, target)
    # Hand-written: the same global batch, split over the ranks (as the runtime's).
    sampler = (
        torch.utils.data.DistributedSampler(dataset, shuffle=False) if hand else None
    )
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=BATCH // world, sampler=sampler
    )
    tracker = LiveBytes()
    with tracker:
        model = Net().to(device)
        block = sum(p.numel() * p.element_size() for p in model.blocks[0].parameters())
        if hand:
            optimizer = hand_sharded(model)
        else:
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        if runtime:
            model = accel.prepare_model(model)
            optimizer = accel.prepare_optimizer(optimizer)
            loader = accel.prepare_dataloader(loader)
        # Where the peak is: while the model is built and sharded, or in training.
        setup_peak, tracker.peak = tracker.peak, tracker.live()
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
    training_peak = tracker.peak
    units = 0
    if (runtime or hand) and "torch.distributed.fsdp" in sys.modules:
        from torch.distributed.fsdp import FSDPModule

        plain = accel.unwrap(model) if runtime else model
        units = sum(isinstance(m, FSDPModule) for m in plain.modules())
    rank = int(os.environ.get("RANK", "0"))
    path = REPORT
    if "WORLD_SIZE" in os.environ:
        path = REPORT.with_name(f"{REPORT.stem}.rank{rank}{REPORT.suffix}")
    path.write_text(
        json.dumps(
            {
                "rank": rank,
                "peak": max(setup_peak, training_peak),
                "setup_peak": setup_peak,
                "training_peak": training_peak,
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
    if hand:
        dist.destroy_process_group()


main()
