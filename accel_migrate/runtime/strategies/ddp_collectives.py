"""What the DDP strategy exchanges itself where DDP's reducer cannot: gradients
averaged by hand, a frozen model's broadcast, and the helpers that read a
wrapper's state (``strategies.ddp`` says when each is used)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.batchnorm import _NormBase
from torch.nn.parallel import DistributedDataParallel

_SPARSE = (
    "accel-migrate: a model whose backward leaves some parameters without a "
    "gradient has sparse gradients, which the runtime cannot average: build its "
    "DDP wrapper with find_unused_parameters=True"
)


def reduced(forward_module: DistributedDataParallel) -> bool:
    """Did DDP's reducer finish this backward (every parameter it waits for)?"""
    try:
        forward_module.reducer._check_reducer_finalized()
    except RuntimeError:
        return False
    return True


def average_gradients(
    module: nn.Module,
    device: torch.device,
    only: list[nn.Parameter] | None = None,
) -> None:
    """What DDP's reduction would have done: every gradient averaged over ranks
    (those of ``only`` where given).

    A parameter without a gradient here but with one on another rank contributed
    zero here; one without a gradient anywhere keeps none, as in the original.
    One all-reduce per dtype of the parameters (one for most models): which
    parameters have a gradient, and whether a rank holds a sparse one, travel
    with the first dtype's gradients (before r33b a first all-reduce of its own
    said which had one). A sparse gradient is refused on every rank, after it.
    """
    params = (
        [p for p in module.parameters() if p.requires_grad] if only is None else only
    )
    if not params:
        return
    by_dtype: dict[torch.dtype, list[nn.Parameter]] = {}
    for param in params:
        by_dtype.setdefault(param.dtype, []).append(param)
    # 1 where this rank has a (dense) gradient, then 1 where it holds a sparse
    # one: sums of 0s and 1s, nonzero exactly where some rank has one, in any
    # float dtype
    flags = [float(p.grad is not None and not p.grad.is_sparse) for p in params]
    flags.append(float(any(p.grad is not None and p.grad.is_sparse for p in params)))
    sums = []
    for index, group in enumerate(by_dtype.values()):
        parts = [_dense(p).reshape(-1) for p in group]
        if index == 0:
            parts.append(torch.tensor(flags, dtype=group[0].dtype, device=device))
        flat = torch.cat(parts)
        dist.all_reduce(flat)
        sums.append(flat)
    *counts, sparse = sums[0][-len(flags) :].tolist()
    if sparse:
        raise RuntimeError(_SPARSE)
    present = {id(p) for p, count in zip(params, counts, strict=True) if count}
    world = dist.get_world_size()
    for group, flat in zip(by_dtype.values(), sums, strict=True):
        flat.div_(world)
        offset = 0
        for param in group:
            size = param.numel()
            if id(param) in present:
                if param.grad is None or param.grad.is_sparse:
                    param.grad = torch.zeros_like(param)
                param.grad.copy_(flat[offset : offset + size].view_as(param))
            offset += size


def _dense(param: nn.Parameter) -> torch.Tensor:
    """What this rank sends for ``param``: its gradient, or zeros."""
    grad = param.grad
    if grad is None or grad.is_sparse:
        return torch.zeros_like(param)
    return grad


#: Where each wrapper's own buffers live: (module, name) pairs, found once per
#: wrapper (a rebuilt wrapper finds them anew; ``forget_own_buffers`` where the
#: buffers it broadcasts change).
_OWN: weakref.WeakKeyDictionary[
    DistributedDataParallel, list[tuple[nn.Module, str]]
] = weakref.WeakKeyDictionary()


def forget_own_buffers(wrapper: nn.Module | None) -> None:
    """``wrapper``'s buffers found anew at the next ``broadcast_own_buffers``
    (every wrapper's, for None: a module taken in late may bring buffers)."""
    if wrapper is None:
        _OWN.clear()
    elif isinstance(wrapper, DistributedDataParallel):
        _OWN.pop(wrapper, None)


def _own_places(wrapper: DistributedDataParallel) -> list[tuple[nn.Module, str]]:
    places = _OWN.get(wrapper)
    if places is None:
        ignored = wrapper.parameters_to_ignore
        seen: set[tuple[int, str]] = set()
        places = []
        for prefix, module in wrapper.module.named_modules(remove_duplicate=False):
            if isinstance(module, _NormBase):
                continue
            for name in module._buffers:
                full = f"{prefix}.{name}" if prefix else name
                if full in ignored or (id(module), name) in seen:
                    continue
                seen.add((id(module), name))
                places.append((module, name))
        _OWN[wrapper] = places
    return places


def broadcast_own_buffers(wrapper: DistributedDataParallel, retained: bool) -> None:
    """The buffers DDP broadcasts that are not a normalisation layer's, made
    rank 0's on every process, as DDP's broadcast before the next forward
    makes them. Called after a backward where an evaluation's forward skips
    DDP's wrapper (``DDPStrategy.without_grad``), whose broadcast it skips
    too: a buffer the model's forward updates from each process's share (a
    running mean of its inputs) was each process's own in that evaluation
    before r33b. BatchNorm's statistics are the global batch's there, the
    same on every process, and are left to DDP.

    Where the backward ``retained`` its graph (a second backward follows,
    ``retain_graph=True``), rank 0's values go into new tensors, which the
    modules then hold: the graph keeps the values it saved (before fixn they
    were written in place, and the second backward read rank 0's). Only a
    buffer whose value differs from rank 0's is rebound (r34d): a reference the
    script holds to one that is already rank 0's (``s = model.s``) stays the
    module's (a rebound one keeps this process's value). Not written in
    place: a tensor the graph saved cannot be told from one it did not, and a
    write that bumps its version would fail the second backward. Where the
    modules are found once per wrapper (``_own_places``); a model without such
    buffers exchanges nothing (a constant buffer is still broadcast: nothing
    tells it apart, and DDP broadcasts it before every forward too)."""
    places = _own_places(wrapper)
    if not places:
        return
    own: dict[int, torch.Tensor] = {}
    for module, name in places:
        buffer = module._buffers.get(name)
        if buffer is not None:
            own.setdefault(id(buffer), buffer)
    if not own:
        return
    sent = [b.clone() for b in own.values()] if retained else list(own.values())
    with torch.no_grad():
        dist._broadcast_coalesced(
            wrapper.process_group, sent, wrapper.broadcast_bucket_size, 0
        )
    if retained:
        # (one whose value is rank 0's already stays the tensor it was; the
        # buffers compared at once: one read of the device's answer, not one
        # per buffer)
        olds = list(own.values())
        differs = torch.stack(
            [torch.ne(old, new).any() for old, new in zip(olds, sent, strict=True)]
        ).tolist()
        fresh = {
            key: new
            for key, new, moved in zip(own, sent, differs, strict=True)
            if moved
        }
        for module, name in places:
            buffer = module._buffers.get(name)
            if buffer is not None and id(buffer) in fresh:
                module._buffers[name] = fresh[id(buffer)]


def moving_inputs(wrapper: DistributedDataParallel) -> Callable[..., Any]:
    """The user's module under ``wrapper``, its inputs first moved to the
    wrapper's device as DDP's forward moves them (``to_kwargs``: a CPU batch
    given to a model on ``cuda:1``), where the wrapper has ``device_ids``."""
    module = wrapper.module
    device_ids = wrapper.device_ids
    if not device_ids:
        return module

    def run(*args: Any, **kwargs: Any) -> Any:
        moved_args, moved_kwargs = wrapper.to_kwargs(args, kwargs, device_ids[0])
        return module(*moved_args[0], **moved_kwargs[0])

    return run
