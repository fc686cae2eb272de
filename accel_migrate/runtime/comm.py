"""Collectives. One process: every call is the identity. Several: torch.distributed."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from typing import Any, Literal

import torch
import torch.distributed as dist

from . import progress
from .env import DistEnv
from .faults import install_excepthook, named_collective, process_failed

ReduceOp = Literal["sum", "mean", "max", "min"]

_TORCH_OPS = {
    "sum": dist.ReduceOp.SUM,
    "mean": dist.ReduceOp.SUM,  # divided by the world size afterwards: gloo has no AVG
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
}


class PendingReduce:
    """An all-reduce in flight (or done): ``result()`` waits for it, once."""

    def __init__(
        self,
        tensor: torch.Tensor,
        work: Any = None,
        *,
        divisor: int = 1,
        device: torch.device | None = None,
        named: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        self._tensor = tensor
        self._work = work
        self._divisor = divisor
        self._device = device
        self._named = named

    def result(self) -> torch.Tensor:
        if self._work is not None:
            work, self._work = self._work, None
            if self._named is not None:
                with self._named():
                    work.wait()
            else:
                work.wait()
            if self._divisor != 1:
                self._tensor = self._tensor / self._divisor
            if self._device is not None:
                self._tensor = self._tensor.to(self._device)
        return self._tensor


class Collectives:
    """A world of one process: nothing to exchange."""

    def __init__(self, env: DistEnv, device: torch.device) -> None:
        self.env = env
        self.device = device

    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = "sum") -> torch.Tensor:
        return tensor

    def all_reduce_async(
        self, tensor: torch.Tensor, op: ReduceOp = "sum"
    ) -> PendingReduce:
        """Start an all-reduce; ``result()`` waits for it. Every rank must start it."""
        return PendingReduce(self.all_reduce(tensor, op))

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        return [tensor]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        return obj

    def all_gather_object(self, obj: Any) -> list[Any]:
        return [obj]

    def barrier(self) -> None:
        return None

    def close(self) -> None:
        return None


def broadcast_from_rank0(tensors: Iterable[torch.Tensor], device: torch.device) -> None:
    """Each of ``tensors`` (parameters, buffers) made rank 0's on every
    process: one broadcast per tensor, in order, so every process must pass the
    same ones. A tensor is sent as it is where it lies contiguous on
    ``device``, the runtime's (the process group was made for it: this
    process's GPU, with its index, under NCCL; the CPU under gloo); otherwise as a contiguous copy staged there, copied back after (a
    CPU frozen parameter under a CUDA runtime goes through the GPU: NCCL moves
    only device tensors). (Before fixn each was sent as it lay: a view whose
    elements overlap, a frozen ``nn.Parameter(x.expand(3, 4).t())``, made gloo
    write past its storage, a corrupted heap and an abort; NCCL refused a CPU
    tensor.) One whose elements overlap cannot be written in place: it is
    rebound to the copy (``.data``, on its own device), where it stays a tensor
    of its own. ``tests/gpu/test_gpu_broadcast.py`` runs the NCCL half."""
    wire = device  # (the runtime's: ``cuda:<local rank>`` or the CPU)
    with torch.no_grad():
        for tensor in tensors:
            data = tensor.data
            if data.device == wire and data.is_contiguous():
                dist.broadcast(data, src=0)
                continue
            sent = torch.empty(
                data.shape, dtype=data.dtype, device=wire
            )  # (contiguous, on the wire's device, whatever ``data`` is)
            sent.copy_(data)
            dist.broadcast(sent, src=0)
            if torch._debug_has_internal_overlap(data) == 0:
                data.copy_(sent)
            else:
                tensor.data = sent.to(data.device)


def process_group_backend(device: torch.device, host_tensors: bool = False) -> str:
    """NCCL on a GPU, gloo on the CPU; on a GPU with ``host_tensors`` (shards kept
    in host memory: FSDP's CPU offload) both, NCCL for CUDA tensors and gloo for
    CPU ones, as torch's ``"cpu:gloo,cuda:nccl"`` backend string routes them."""
    if device.type != "cuda":
        return "gloo"
    return "cpu:gloo,cuda:nccl" if host_tensors else "nccl"


class ProcessGroupCollectives(Collectives):
    """Collectives over the default torch.distributed process group."""

    def __init__(
        self,
        env: DistEnv,
        device: torch.device,
        timeout: float,
        host_tensors: bool = False,
    ) -> None:
        super().__init__(env, device)
        self.timeout = timeout
        self._side: Any = None
        if not dist.is_initialized():
            backend = process_group_backend(device, host_tensors)
            store, rank, world = next(
                dist.rendezvous("env://", timeout=timedelta(seconds=timeout))
            )
            # After a restart (--max-restarts) torchrun's store still holds the dead
            # attempt's addresses, and gloo connected to them (torch 2.13); a prefix
            # per attempt keeps every attempt's keys apart.
            attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
            dist.init_process_group(
                backend=backend,
                store=dist.PrefixStore(f"accel-migrate/attempt-{attempt}", store),
                rank=rank,
                world_size=world,
                timeout=timedelta(seconds=timeout),
                device_id=device if device.type == "cuda" else None,
            )
            install_excepthook(env.rank)

    def _side_group(self) -> Any:
        """A second gloo group for reductions that overlap the backward pass.

        gloo runs one group's collectives one after another: a loss reduction
        started before backward held FSDP's gradient reduce-scatters back (a step
        6% slower than without it, measured at world 2). On its own group it runs
        beside them. Made on first use; every rank reaches that use at the same
        point of the script (see ``Runtime.start_loss_reduce``). NCCL keeps the
        default group: a second communicator costs GPU memory, and a tiny
        all-reduce ahead of backward on the stream costs microseconds.
        """
        if self.device.type == "cuda":
            return None
        if self._side is None:
            self._side = dist.new_group(
                backend="gloo", timeout=timedelta(seconds=self.timeout)
            )
        return self._side

    @contextmanager
    def _named(self, operation: str, started: bool = True) -> Iterator[None]:
        if started:  # (a collective every process starts: ``progress``)
            progress.collective()
        with (
            progress.inside(),
            named_collective(self.env.rank, operation, self.timeout),
        ):
            yield

    def _on_device(self, tensor: torch.Tensor) -> torch.Tensor:
        # NCCL only moves device tensors; gloo takes CPU ones.
        return tensor.to(self.device) if tensor.device != self.device else tensor

    def all_reduce(self, tensor: torch.Tensor, op: ReduceOp = "sum") -> torch.Tensor:
        work = self._on_device(tensor.detach().clone())
        with self._named(f"all_reduce ({op})"):
            dist.all_reduce(work, op=_TORCH_OPS[op])
        if op == "mean":
            work = work / self.env.world_size
        return work.to(tensor.device)

    def all_reduce_async(
        self, tensor: torch.Tensor, op: ReduceOp = "sum"
    ) -> PendingReduce:
        work = self._on_device(tensor.detach().clone())
        with self._named(f"all_reduce ({op})"):
            handle = dist.all_reduce(
                work, op=_TORCH_OPS[op], async_op=True, group=self._side_group()
            )
        return PendingReduce(
            work,
            handle,
            divisor=self.env.world_size if op == "mean" else 1,
            device=tensor.device,
            # (its result may be read on some processes only: not counted)
            named=lambda: self._named(f"all_reduce ({op})", started=False),
        )

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Gather tensors whose first dimension may differ between ranks."""
        local = self._on_device(tensor.detach().contiguous())
        size = torch.tensor([local.shape[0] if local.dim() else 1], device=self.device)
        sizes = [torch.zeros_like(size) for _ in range(self.env.world_size)]
        with self._named("all_gather"):
            dist.all_gather(sizes, size)
        longest = int(max(s.item() for s in sizes))
        if local.dim() == 0:
            padded = local.reshape(1)
        else:
            padded = local.new_zeros((longest, *local.shape[1:]))
            padded[: local.shape[0]] = local
        parts = [torch.empty_like(padded) for _ in range(self.env.world_size)]
        with self._named("all_gather"):
            dist.all_gather(parts, padded)
        if local.dim() == 0:
            return [p.reshape(()).to(tensor.device) for p in parts]
        return [
            p[: int(n.item())].to(tensor.device)
            for p, n in zip(parts, sizes, strict=True)
        ]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        box = [obj if self.env.rank == src else None]
        with self._named("broadcast"):
            dist.broadcast_object_list(box, src=src, device=self.device)
        return box[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.env.world_size
        with self._named("all_gather"):
            dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        with self._named("barrier"):
            if self.device.type == "cuda":
                dist.barrier(device_ids=[self.device.index or 0])
            else:
                dist.barrier()

    def close(self) -> None:
        if not dist.is_initialized():
            return
        progress.stop_poster()  # (its store goes with the process group)
        if self.device.type != "cuda" and not process_failed():
            # gloo: a rank that tears its connections down while a peer is still
            # finishing (rank 0 writing the last checkpoint) could abort at exit
            # ("terminate called without an active exception", seen in CI). Leave
            # together. monitored_barrier cannot match a peer's other collective,
            # so a peer that is still training only delays this exit.
            try:
                dist.monitored_barrier(
                    timeout=timedelta(seconds=min(self.timeout, 30.0))
                )
            except Exception:
                pass
        dist.destroy_process_group()
