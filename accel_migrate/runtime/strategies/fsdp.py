"""Fully sharded data parallel (FSDP2, ``torch.distributed.fsdp.fully_shard``).

Each rank keeps a shard of every parameter, gradient and optimizer state; the
full parameters are gathered for forward and backward. Works over gloo on the CPU
as well as NCCL on GPUs.

- Before sharding, rank 0's parameters and buffers are broadcast: ranks whose
  random initialisation differed would otherwise shard different models.
- Sharding replaces the module's parameters. Every optimizer that holds the old
  ones, prepared or not, is remapped to the new ones; state it already holds for
  them (a resume that loads it before the first forward) is sharded with them.
- State dicts are full and keep the original keys: gathered to rank 0 (on the
  CPU) for saving, scattered from rank 0 for loading (see ``_fsdp_state``).
  Optimizer state dicts keep PyTorch's own layout (integer parameter ids), so a
  checkpoint loads into the original script's optimizer too.
- ``accel.save_state`` does not gather: each rank writes its own shards
  (``sharded_checkpoint``; see ``runtime/sharded_checkpoint.py``).
- ``fsdp-cpu-offload``: FSDP2's ``CPUOffloadPolicy`` on every unit. On a GPU the
  shards, their gradients and the optimizer state live in (pinned) host memory,
  each unit is copied to the GPU for its all-gather and the optimizer steps on
  the CPU; the process group then also has a gloo backend for those CPU shards
  (``host_collectives``). On a CPU device the policy runs unpinned and changes
  nothing: the shards live in host memory already (pinning would need an
  accelerator, torch 2.13 refuses it).
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.weak import WeakIdKeyDictionary

from ..comm import broadcast_from_rank0
from ..config import RuntimeConfig
from .base import LateParameterError, Strategy, optimizers_holding
from .fsdp_units import block_units, checkpoint_block, describe_units

# `torch.distributed.tensor` (DTensor) and `torch.distributed.fsdp` are imported
# where they are used, never at module level: importing them pulls in sympy and
# costs about 0.7 s, which every migrated script would pay at `import
# accel_migrate.runtime`, FSDP or not (see docs/performance.md, start-up).


class FSDPStrategy(Strategy):
    name = "fsdp"
    settings = frozenset(
        {
            "fsdp_wrap",
            "fsdp_block_classes",
            "fsdp_min_params",
            "fsdp_reshard_after_forward",
            "fsdp_cpu_offload",
            "activation_checkpointing",
        }
    )
    shards_parameters = True
    sharded_checkpoint = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Old parameter -> its sharded replacement. Weak keys: holding the old,
        #: full parameters would keep a whole unsharded copy of the model alive on
        #: every rank (bench/memory.py measured it: +1/4 of world 1's model state at
        #: world 2). An optimizer still holding one keeps its entry.
        self._replaced: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._sharded: list[nn.Module] = []

    # -- models -------------------------------------------------------------------------
    def setup_module(self, module: nn.Module) -> nn.Module:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        self._broadcast_from_rank0(module)
        before = dict(module.named_parameters())
        policy = self.precision.fsdp_policy() or MixedPrecisionPolicy()
        options: dict[str, Any] = {
            "mesh": self.device_mesh(),
            "mp_policy": policy,
            "reshard_after_forward": self.config.fsdp_reshard_after_forward,
            "offload_policy": self.offload_policy(),
        }
        # A block hands its output to the next block or to the root's own layers,
        # which compute in the policy's dtype: only the root's output goes back to
        # fp32 (a block's fp32 output met a bf16 head: "mat1 and mat2 must have
        # the same dtype").
        block_options = {**options, "mp_policy": replace(policy, output_dtype=None)}
        blocks = block_units(module, self.config)
        said = describe_units(module, blocks, self.config)
        if said is not None and self.env.rank == 0:  # docs/runtime.md
            print(f"accel-migrate: {said}", file=sys.stderr, flush=True)
        for block in blocks:
            if self.config.activation_checkpointing:
                checkpoint_block(block)
            fully_shard(block, **block_options)
        # The root's unit holds what no block does (embeddings, heads).
        fully_shard(module, **options)
        after = dict(module.named_parameters())
        for name, old in before.items():
            if after[name] is not old:
                self._replaced[old] = after[name]
        self._sharded.append(module)
        # setup_optimizer may take part in a collective, so every rank must find
        # the same optimizers in the same order: an optimizer the script dropped
        # may live on in a reference cycle until a collection, whose timing differs
        # between ranks (collect first), and gc's order is not promised (sort by
        # the model's parameter order).
        gc.collect()
        order = {p: i for i, p in enumerate(before.values())}
        holding = optimizers_holding(set(order))
        holding.sort(
            key=lambda opt: min(
                order.get(p, len(order)) for g in opt.param_groups for p in g["params"]
            )
        )
        for optimizer in holding:
            self.setup_optimizer(optimizer)
        return module

    @classmethod
    def host_collectives(cls, config: RuntimeConfig) -> bool:
        # Offloaded shards are CPU tensors: gathering a state dict, clipping's
        # norm and DCP's planning run collectives on them, which NCCL refuses
        # ("No backend type associated with device type cpu").
        return config.fsdp_cpu_offload

    def offload_policy(self) -> Any:
        """``CPUOffloadPolicy`` under ``fsdp-cpu-offload``, else FSDP2's default."""
        from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy

        if not self.config.fsdp_cpu_offload:
            return OffloadPolicy()
        # Pinning asks the accelerator for page-locked memory; without one torch
        # 2.13 raises "Cannot access accelerator device when none is available".
        return CPUOffloadPolicy(pin_memory=self.device.type == "cuda")

    def device_mesh(self) -> Any | None:
        """The mesh ``fully_shard`` shards over; None: every process, one dimension
        (``fully_shard``'s default). HSDP gives a 2-D one (``strategies/hsdp.py``)."""
        return None

    def _broadcast_from_rank0(self, module: nn.Module) -> None:
        if not dist.is_initialized():
            return
        broadcast_from_rank0([*module.parameters(), *module.buffers()], self.device)

    def module_state_dict(self, module: nn.Module) -> dict[str, Any]:
        if module not in self._sharded:
            return module.state_dict()
        from ._fsdp_state import gather_model_state

        return gather_model_state(module, self.env.rank)

    def load_module_state_dict(
        self, module: nn.Module, state: Mapping[str, Any], strict: bool = True
    ) -> Any:
        if module not in self._sharded:
            return module.load_state_dict(state, strict=strict)
        from ._fsdp_state import scatter_model_state

        return scatter_model_state(module, dict(state), self.comm, strict)

    def after_backward(self, forward_module: nn.Module) -> nn.Module | None:
        """Sharding replaced every parameter the model had at its first forward
        by a DTensor; one that is not got there later (``model.layer.scale =
        nn.Parameter(...)``, a new submodule) and holds a gradient no unit
        reduces: each process would step it with its own share's gradient.

        Each process decides alone, with no collective: where only some got
        such a gradient (a parameter added on one process, or used only for
        one process's share of the batch), those raise at once, naming it, and
        the others fail in their next collective on the closed connection. A
        collective to decide together cannot be made safe: a process with no
        late parameter would not know it had to join it."""
        from torch.distributed.tensor import DTensor

        late = [
            name
            for name, p in forward_module.named_parameters()
            if p.grad is not None and not isinstance(p, DTensor)
        ]
        if late:
            raise LateParameterError(
                f"accel-migrate: parameter {late[0]!r} of a prepared model was added "
                f"after the model's first forward, where --strategy {self.name} "
                "sharded the model without it, so its gradient is not averaged across "
                "the processes. Add it before the model's first forward (where the "
                "model is built), or use --strategy ddp, which trains parameters "
                "added later"
            )
        return None

    @contextmanager
    def no_sync(self, forward_module: nn.Module | None) -> Iterator[None]:
        if forward_module is None or not hasattr(
            forward_module, "set_requires_gradient_sync"
        ):
            yield
            return
        forward_module.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            forward_module.set_requires_gradient_sync(True)

    # -- optimizers -----------------------------------------------------------------------
    def setup_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Point the optimizer at the sharded parameters.

        An optimizer may already hold state for the old parameters: a script that
        resumes loads it before the model's first forward, where the model is
        sharded. That full state is sharded like the parameters (rank 0's values,
        as for any FSDP load). Whether to is decided together: a rank that loaded
        nothing must still take part.
        """
        held = [
            p
            for group in optimizer.param_groups
            for p in group["params"]
            if p in self._replaced
        ]
        if not held:
            self._hook_state_dict(optimizer)
            return
        resumed = self._any_rank(any(optimizer.state.get(p) for p in held))
        if resumed and self._sharded_optimizer(optimizer):
            # Part of its state is sharded already (another model it spans ran
            # first); resharding the whole of it is not supported. The same
            # answer on every rank: nobody waits in a collective.
            raise RuntimeError(
                "an optimizer over the parameters of several prepared models was "
                "given a state before the models' first forward; under FSDP, load "
                "it after every model has run once (optimizer.load_state_dict(...))"
            )
        loaded = torch.optim.Optimizer.state_dict(optimizer) if resumed else None
        for group in optimizer.param_groups:
            params = group["params"]
            for i, param in enumerate(params):
                new = self._replaced.get(param)
                if new is not None:
                    optimizer.state.pop(param, None)
                    params[i] = new
        self._hook_state_dict(optimizer)
        if loaded is not None:
            from ._fsdp_state import scatter_optimizer_state

            scatter_optimizer_state(optimizer, loaded, self.comm)

    def _any_rank(self, flag: bool) -> bool:
        if self.env.world_size == 1:
            return flag
        return bool(self.comm.all_reduce(torch.tensor([float(flag)]), "sum").item())

    def _hook_state_dict(self, optimizer: torch.optim.Optimizer) -> None:
        if getattr(optimizer, "_accel_fsdp_state_dict", False):
            return
        strategy = self

        def state_dict(opt: torch.optim.Optimizer) -> dict[str, Any]:
            return strategy.optimizer_state_dict(opt)

        def load_state_dict(opt: torch.optim.Optimizer, state: dict[str, Any]) -> None:
            strategy.load_optimizer_state_dict(opt, state)

        optimizer.state_dict = types.MethodType(state_dict, optimizer)  # type: ignore[method-assign]
        optimizer.load_state_dict = types.MethodType(load_state_dict, optimizer)  # type: ignore[method-assign]
        optimizer._accel_fsdp_state_dict = True  # type: ignore[attr-defined]

    def _sharded_optimizer(self, optimizer: torch.optim.Optimizer) -> bool:
        if "torch.distributed.tensor" not in sys.modules:
            return False  # never imported: no parameter can be a DTensor
        from torch.distributed.tensor import DTensor

        return any(
            isinstance(p, DTensor)
            for group in optimizer.param_groups
            for p in group["params"]
        )

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The full optimizer state in PyTorch's layout (integer parameter ids), on rank 0."""
        if not self._sharded_optimizer(optimizer):
            return torch.optim.Optimizer.state_dict(optimizer)
        from ._fsdp_state import gather_optimizer_state

        return gather_optimizer_state(optimizer, self.env.rank)

    def load_optimizer_state_dict(
        self, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        if not self._sharded_optimizer(optimizer):
            torch.optim.Optimizer.load_state_dict(optimizer, state)
            return
        from ._fsdp_state import scatter_optimizer_state

        scatter_optimizer_state(optimizer, state, self.comm)

    def clip_grad_norm_(
        self,
        parameters: Iterable[torch.Tensor],
        max_norm: float,
        norm_type: float = 2.0,
    ) -> torch.Tensor:
        norm = torch.nn.utils.clip_grad_norm_(
            list(parameters), max_norm, norm_type=norm_type
        )
        return norm.full_tensor() if hasattr(norm, "full_tensor") else norm
