"""The tensors of a sharded state folder, written and read with
``torch.distributed.checkpoint`` (DCP).

Under FSDP every rank writes its own shards of the models and optimizers into
``tensors/`` (one ``__<rank>_0.distcp`` file per rank and DCP's ``.metadata``);
nothing is gathered to rank 0. Reading lays the saved shards out as the job that
reads them has its tensors: sharded over another number of ranks, or whole (DDP,
one process, the converter below), so a job resumes at any world size.

One flat DCP dictionary, keyed so that it converts back to PyTorch's own layout:

- ``model.<k>.<key>``: prepared model ``k``'s state dict entry, original key;
- ``optimizer.<k>.<i>.<name>``: optimizer ``k``'s state ``name`` (``exp_avg``,
  ``step``...) for the parameter PyTorch numbers ``i`` (param-group order).

Non-tensor optimizer state and the param groups' hyperparameters are small and the
same on every rank; they go to ``shared.pt`` with the rest (see ``checkpoint``).
(The ``torch.distributed.checkpoint.state_dict`` helpers are not used: they failed
on CPU/gloo with torch 2.13 for mixed plain tensors and DTensors; plain
``dcp.save``/``dcp.load`` over DTensors work.)
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

TENSORS = "tensors"


def _is_dtensor(value: Any) -> bool:
    # Never import DTensor here: a job that shards nothing must not pay for it.
    if "torch.distributed.tensor" not in sys.modules:
        return False
    from torch.distributed.tensor import DTensor

    return isinstance(value, DTensor)


def _local(value: torch.Tensor) -> torch.Tensor:
    return value.to_local() if _is_dtensor(value) else value  # type: ignore[attr-defined]


def ordered_params(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The optimizer's parameters in the order PyTorch numbers them."""
    seen: dict[int, torch.Tensor] = {}
    for group in optimizer.param_groups:
        for param in group["params"]:
            seen.setdefault(id(param), param)
    return list(seen.values())


def _hyperparameters(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    return [
        {
            **{key: value for key, value in group.items() if key != "params"},
            "param_count": len(group["params"]),
        }
        for group in optimizer.param_groups
    ]


def save_tensors(
    folder: Path, models: list[nn.Module], optimizers: list[torch.optim.Optimizer]
) -> list[dict[str, Any]]:
    """Write every rank's shards to ``folder/tensors`` (a collective); return the
    optimizers' small parts for ``shared.pt``."""
    import torch.distributed.checkpoint as dcp

    flat: dict[str, Any] = {}
    for k, model in enumerate(models):
        for key, value in model.state_dict().items():
            if isinstance(value, torch.Tensor):
                flat[f"model.{k}.{key}"] = value.detach()
    small = []
    for k, optimizer in enumerate(optimizers):
        values: dict[int, dict[str, Any]] = {}
        for i, param in enumerate(ordered_params(optimizer)):
            for name, value in optimizer.state.get(param, {}).items():
                if isinstance(value, torch.Tensor):
                    flat[f"optimizer.{k}.{i}.{name}"] = value.detach()
                else:
                    values.setdefault(i, {})[name] = value
        small.append({"param_groups": _hyperparameters(optimizer), "values": values})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "torch.distributed is disabled")
        dcp.save(
            flat, checkpoint_id=folder / TENSORS, no_dist=not dist.is_initialized()
        )
    return small


def _saved(folder: Path) -> dict[str, Any]:
    """DCP's record of what ``folder/tensors`` holds: key -> storage metadata."""
    from torch.distributed.checkpoint import FileSystemReader

    return dict(FileSystemReader(folder / TENSORS).read_metadata().state_dict_metadata)


def _load(folder: Path, flat: dict[str, Any]) -> None:
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        # One process without a process group is what no_dist says: not news.
        warnings.filterwarnings("ignore", "torch.distributed is disabled")
        dcp.load(
            flat, checkpoint_id=folder / TENSORS, no_dist=not dist.is_initialized()
        )


def load_tensors(
    folder: Path,
    models: list[nn.Module],
    optimizers: list[torch.optim.Optimizer],
    small: list[dict[str, Any]],
) -> None:
    """Read the saved shards into ``models`` and ``optimizers`` as they are laid
    out in this job (a collective when a process group exists)."""
    saved = _saved(folder)
    flat: dict[str, Any] = {}
    currents = []
    for k, model in enumerate(models):
        current = {
            key: value
            for key, value in model.state_dict().items()
            if isinstance(value, torch.Tensor)
        }
        prefix = f"model.{k}."
        held = {key[len(prefix) :] for key in saved if key.startswith(prefix)}
        if held != set(current):
            raise RuntimeError(
                f"{folder} holds a model {k} with other keys than this script's: "
                f"missing {sorted(set(current) - held)}, "
                f"unexpected {sorted(held - set(current))}"
            )
        # Fresh targets laid out like this job's tensors; copied in below, so
        # that what a state dict entry shares with its parameter does not matter.
        for key, value in current.items():
            flat[prefix + key] = torch.empty_like(value.detach())
        currents.append(current)
    plans = []
    for k, optimizer in enumerate(optimizers):
        params = ordered_params(optimizer)
        plan: dict[int, dict[str, Any]] = {}
        prefix = f"optimizer.{k}."
        for key, meta in saved.items():
            if not key.startswith(prefix):
                continue
            index, name = key[len(prefix) :].split(".", 1)
            i = int(index)
            if i >= len(params):
                raise RuntimeError(
                    f"{folder} holds state for parameter {i} of optimizer {k}, "
                    f"which has {len(params)}"
                )
            flat[key] = _target(params[i], meta, _group_of(optimizer, params[i]))
            plan.setdefault(i, {})[name] = key
        plans.append((params, plan))
    _load(folder, flat)
    with torch.no_grad():
        for k, current in enumerate(currents):
            for key, value in current.items():
                _local(value).copy_(_local(flat[f"model.{k}.{key}"]))
    for optimizer, (params, plan), extra in zip(optimizers, plans, small, strict=True):
        counts = [hyper["param_count"] for hyper in extra["param_groups"]]
        if counts != [len(group["params"]) for group in optimizer.param_groups]:
            raise ValueError(
                f"loaded state has parameter groups of {counts} parameters, the "
                f"optimizer {[len(g['params']) for g in optimizer.param_groups]}"
            )
        optimizer.state.clear()
        values = {int(i): entry for i, entry in extra["values"].items()}
        for i in sorted(set(plan) | set(values)):
            entry = dict(values.get(i, {}))
            entry.update({name: flat[key] for name, key in plan.get(i, {}).items()})
            optimizer.state[params[i]] = entry
        for group, hyper in zip(
            optimizer.param_groups, extra["param_groups"], strict=True
        ):
            group.update({k: v for k, v in hyper.items() if k != "param_count"})


def _group_of(optimizer: torch.optim.Optimizer, param: torch.Tensor) -> dict[str, Any]:
    for group in optimizer.param_groups:
        if any(p is param for p in group["params"]):
            return group
    return {}


def _target(param: torch.Tensor, meta: Any, group: dict[str, Any]) -> torch.Tensor:
    """Where a saved optimizer state tensor goes: laid out like its parameter
    when it has the parameter's shape (``exp_avg``), else a whole tensor where
    PyTorch keeps it (``step``: on the CPU unless capturable or fused)."""
    size, dtype = tuple(meta.size), meta.properties.dtype
    if size == tuple(param.shape):
        return torch.empty_like(param.detach(), dtype=dtype)
    on_device = group.get("capturable") or group.get("fused")
    device = _local(param).device if on_device else torch.device("cpu")
    return torch.empty(size, dtype=dtype, device=device)


def read_plain(
    folder: Path, model_count: int, small: list[dict[str, Any]]
) -> dict[str, Any]:
    """The whole state, one process, no process group: plain model state dicts
    and optimizer state dicts in PyTorch's layout (integer parameter ids)."""
    saved = _saved(folder)
    flat = {
        key: torch.empty(tuple(meta.size), dtype=meta.properties.dtype)
        for key, meta in saved.items()
        if hasattr(meta, "size")
    }
    _load(folder, flat)
    models: dict[int, dict[str, Any]] = {}
    optimizers = [
        {"state": {}, "param_groups": [dict(g) for g in extra["param_groups"]]}
        for extra in small
    ]
    for key, value in flat.items():
        kind, k, rest = key.split(".", 2)
        if kind == "model":
            models.setdefault(int(k), {})[rest] = value
        else:
            index, name = rest.split(".", 1)
            optimizers[int(k)]["state"].setdefault(int(index), {})[name] = value
    for extra, optimizer in zip(small, optimizers, strict=True):
        for i, entry in extra["values"].items():
            optimizer["state"].setdefault(int(i), {}).update(entry)
        _number_params(optimizer)
    return {
        "models": [models.get(k, {}) for k in range(model_count)],
        "optimizers": optimizers,
    }


def _number_params(optimizer: dict[str, Any]) -> None:
    """Give each param group PyTorch's integer ids, in order. The count per group
    is not in the tensors; ``param_count`` was saved with the hyperparameters."""
    start = 0
    for group in optimizer["param_groups"]:
        count = group.pop("param_count")
        group["params"] = list(range(start, start + count))
        start += count
