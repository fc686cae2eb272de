"""Full state dicts for FSDP2-sharded models and their optimizers.

Written with DTensor primitives, one tensor at a time: ``full_tensor()`` gathers,
``distribute_tensor(..., src_data_rank=0)`` scatters rank 0's values. (The
``torch.distributed.checkpoint.state_dict`` helpers failed on CPU/gloo with torch
2.13: loading mixed plain tensors and DTensors.) Gathered state lives on rank 0,
on the CPU; other ranks get an empty ``state``. Loading takes rank 0's values, so
other ranks may pass what they got (nothing), or the same file.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.nn.modules.module import _IncompatibleKeys

from ..comm import Collectives
from ..sharded_checkpoint import ordered_params


def gather_model_state(module: nn.Module, rank: int) -> dict[str, Any]:
    full: dict[str, Any] = {}
    for name, value in module.state_dict().items():
        if isinstance(value, DTensor):
            value = value.full_tensor()
        if rank == 0:
            full[name] = (
                value.detach().cpu() if isinstance(value, torch.Tensor) else value
            )
    return full


def _spread(
    full: torch.Tensor | None,
    like: torch.Tensor,
    shape: tuple[int, ...],
    dtype: torch.dtype,
) -> torch.Tensor:
    """Rank 0's ``full`` tensor, laid out like ``like`` (a shard or a plain tensor)."""
    device = like.to_local().device if isinstance(like, DTensor) else like.device
    source = (
        full.to(device, dtype)
        if full is not None
        else torch.empty(shape, dtype=dtype, device=device)
    )
    if isinstance(like, DTensor):
        return distribute_tensor(
            source, like.device_mesh, like.placements, src_data_rank=0
        )
    dist.broadcast(source, src=0)
    return source


def _shape_plan(state: dict[str, Any]) -> dict[str, Any]:
    return {
        name: (
            ("tensor", tuple(value.shape), value.dtype)
            if isinstance(value, torch.Tensor)
            else ("value", value)
        )
        for name, value in state.items()
    }


def scatter_model_state(
    module: nn.Module, state: dict[str, Any], comm: Collectives, strict: bool
) -> _IncompatibleKeys:
    rank = comm.env.rank
    plan = comm.broadcast_object(_shape_plan(state) if rank == 0 else None)
    current = module.state_dict()
    missing = [name for name in current if name not in plan]
    unexpected = [name for name in plan if name not in current]
    if strict and (missing or unexpected):
        raise RuntimeError(
            f"Error(s) in loading state_dict for {type(module).__name__}: "
            f"missing keys {missing}, unexpected keys {unexpected}"
        )
    with torch.no_grad():
        for name, target in current.items():
            if name not in plan or plan[name][0] != "tensor":
                continue
            _, shape, _ = plan[name]
            value = _spread(
                state.get(name) if rank == 0 else None, target, shape, target.dtype
            )
            local_target = target.to_local() if isinstance(target, DTensor) else target
            local_value = value.to_local() if isinstance(value, DTensor) else value
            local_target.copy_(local_value)
    return _IncompatibleKeys(missing, unexpected)


def gather_optimizer_state(
    optimizer: torch.optim.Optimizer, rank: int
) -> dict[str, Any]:
    """PyTorch's layout: parameters numbered in param-group order."""
    params = ordered_params(optimizer)
    index = {id(p): i for i, p in enumerate(params)}
    state: dict[int, dict[str, Any]] = {}
    for i, param in enumerate(params):
        entry = {}
        for key, value in optimizer.state.get(param, {}).items():
            if isinstance(value, DTensor):
                value = value.full_tensor()
            entry[key] = (
                value.detach().cpu().clone()
                if isinstance(value, torch.Tensor)
                else value
            )
        if entry and rank == 0:
            state[i] = entry
    groups = [
        {
            **{k: v for k, v in group.items() if k != "params"},
            "params": [index[id(p)] for p in group["params"]],
        }
        for group in optimizer.param_groups
    ]
    return {"state": state, "param_groups": groups}


def scatter_optimizer_state(
    optimizer: torch.optim.Optimizer, state: dict[str, Any], comm: Collectives
) -> None:
    rank = comm.env.rank
    plan = comm.broadcast_object(
        {
            "state": {
                int(i): _shape_plan(entry)
                for i, entry in state.get("state", {}).items()
            },
            "param_groups": [
                {k: v for k, v in g.items() if k != "params"}
                for g in state.get("param_groups", [])
            ],
        }
        if rank == 0
        else None
    )
    params = ordered_params(optimizer)
    if len(plan["param_groups"]) != len(optimizer.param_groups):
        raise ValueError(
            f"loaded state dict has {len(plan['param_groups'])} parameter groups, "
            f"the optimizer has {len(optimizer.param_groups)}"
        )
    saved = (
        {int(i): entry for i, entry in state.get("state", {}).items()}
        if rank == 0
        else {}
    )
    with torch.no_grad():
        for i, param in enumerate(params):
            if i not in plan["state"]:
                continue
            entry: dict[str, Any] = {}
            for key, spec in plan["state"][i].items():
                if spec[0] == "value":
                    entry[key] = spec[1]
                    continue
                _, shape, dtype = spec
                full = saved[i][key] if rank == 0 else None
                if shape == tuple(param.shape) and isinstance(param, DTensor):
                    entry[key] = _spread(full, param, shape, dtype)
                else:  # a scalar such as Adam's step count
                    value = (
                        full if full is not None else torch.empty(shape, dtype=dtype)
                    )
                    entry[key] = comm.broadcast_object(value if rank == 0 else None)
            optimizer.state[param] = entry
    for group, hyper in zip(optimizer.param_groups, plan["param_groups"], strict=True):
        group.update(hyper)
