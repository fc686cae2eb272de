"""InstanceNorm's running statistics over the global batch.

An InstanceNorm layer normalises each sample by that sample's own statistics,
so its output does not depend on which share of the batch a process holds. With
``track_running_stats=True`` (StarGAN's generator, some style-transfer nets) a
train-mode forward also moves ``running_mean`` and ``running_var`` towards the
mean, over the batch's samples, of their own means and (unbiased) variances, and
eval mode then normalises by those. Over a process's share that mean is the
share's, and the strategy's buffer broadcast keeps the main process's: the
trained model would evaluate otherwise than the original's, while every loss of
training agrees.

In global-batch mode at more than one process, each such layer (torch's own
InstanceNorm1d/2d/3d, or a subclass keeping its forward) is made to update them
as the original does with the whole batch: the per-sample statistics are summed
across the processes (one collective of ``2C + 1`` numbers per train-mode
forward; every process runs the same forwards, as for BatchNorm) and the running
statistics set from their values before the forward. The output is torch's own
computation, untouched. As for BatchNorm, the layers keep their objects, names,
state dict keys and pickled class (``sync_batchnorm``), and ``--no-sync-batchnorm``
or per-device batches leave them as they are.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.instancenorm import _InstanceNorm

from .sync_batchnorm import synced_subclass

_CONVERTIBLE = (nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d)
_SYNCED: dict[type, type] = {}


def _global_update(layer: _InstanceNorm, x: torch.Tensor) -> None:
    """Set ``layer``'s running statistics as one update with the global batch's
    per-sample statistics (``x`` is this process's share of it, (N, C, ...))."""
    group = getattr(layer, "_accel_group", None)
    channels = layer.running_mean.shape[0]  # type: ignore[union-attr]
    dims = list(range(2, x.dim()))
    stats = x.detach().double()
    if x.shape[0] and dims:
        means = stats.mean(dims)
        variances = torch.var(stats, dim=dims, correction=1)
        local = torch.cat(
            [means.sum(0), variances.sum(0), means.new_tensor([float(x.shape[0])])]
        )
    else:
        local = stats.new_zeros(2 * channels + 1)
    dist.all_reduce(local, group=group)
    total = float(local[-1])
    if total == 0:
        return
    factor = layer.momentum if layer.momentum is not None else 0.0
    mean, var = local[:channels] / total, local[channels : 2 * channels] / total
    layer.running_mean.mul_(1 - factor).add_(  # type: ignore[union-attr]
        mean.to(layer.running_mean.dtype), alpha=factor  # type: ignore[union-attr]
    )
    layer.running_var.mul_(1 - factor).add_(  # type: ignore[union-attr]
        var.to(layer.running_var.dtype), alpha=factor  # type: ignore[union-attr]
    )


def _synced_apply(self: _InstanceNorm, x: torch.Tensor) -> torch.Tensor:
    base = _InstanceNorm._apply_instance_norm
    if not (self.training and self.track_running_stats) or self.running_mean is None:
        return base(self, x)  # type: ignore[no-any-return]
    before = (self.running_mean.clone(), self.running_var.clone())  # type: ignore[union-attr]
    out = base(self, x) if x.shape[0] else x.clone()
    with torch.no_grad():
        self.running_mean.copy_(before[0])
        self.running_var.copy_(before[1])  # type: ignore[union-attr]
        _global_update(self, x)
    return out  # type: ignore[no-any-return]


def synced_class(cls: type) -> type:
    """The subclass of ``cls`` whose running statistics are the global batch's."""
    return synced_subclass(
        cls, _SYNCED, __name__, "_apply_instance_norm", _synced_apply
    )


def tracking_layers(module: nn.Module) -> list[nn.Module]:
    """torch's InstanceNorm layers (or subclasses keeping its computation) in
    ``module`` that track running statistics."""
    return [
        m
        for m in module.modules()
        if isinstance(m, _CONVERTIBLE)
        and m.track_running_stats
        and not getattr(m, "_accel_synced", False)
        and type(m).forward is _InstanceNorm.forward
        and type(m)._apply_instance_norm is _InstanceNorm._apply_instance_norm
    ]


def convert(module: nn.Module, group: Any = None) -> int:
    """Make the running statistics of ``module``'s InstanceNorm layers the global
    batch's; returns how many layers were converted."""
    layers = tracking_layers(module)
    for layer in layers:
        layer.__class__ = synced_class(type(layer))
        if group is not None:
            layer._accel_group = group  # type: ignore[assignment]
    return len(layers)


def prepare(module: nn.Module, runtime: Any) -> None:
    """Called with ``sync_batchnorm.prepare`` when a prepared model's wrapper is
    built: global-batch mode, several processes, sync-batchnorm on."""
    env = runtime.env
    if not env.distributed or not dist.is_initialized():
        return
    if not tracking_layers(module):
        return  # nothing to convert (most models): the settings are not read
    config = runtime.config
    if config.batch_mode == "per-device" or not config.sync_batchnorm:
        return
    convert(module)


__all__ = ["convert", "prepare", "synced_class", "tracking_layers"]
