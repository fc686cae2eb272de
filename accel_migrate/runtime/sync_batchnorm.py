"""BatchNorm over the global batch, on CPU (gloo) as well as CUDA (NCCL).

In the default global-batch mode every rank takes its slice of the original
script's batch, so a BatchNorm layer in train mode that normalised by its own
slice would see half the samples at world 2: other statistics, other losses.
Here the statistics are those of the global batch, as in the original script:

- forward: each rank's per-channel mean, sum of squared deviations and count are
  gathered (one collective of ``world * (2C + 1)`` numbers) and combined in rank
  order, the same on every rank (Chan's parallel variance: no cancellation of
  ``E[x^2] - E[x]^2``). A rank with an empty slice of a short last batch gives
  count 0. ``running_mean``/``running_var`` are updated as torch's BatchNorm
  would with the global batch (unbiased variance with the global count),
  including ``momentum=None`` (a cumulative average).
- backward: the per-channel sums of the output gradient and of the gradient
  times the normalised input are all-reduced (``2C`` numbers), which gives the
  input gradient of the global batch. The weight and bias gradients are local
  sums; the strategy averages them like every other parameter's.
- eval mode (running statistics) runs torch's own BatchNorm, with no collective.

torch's ``SyncBatchNorm`` refuses CPU tensors and replaces the modules. Here the
modules stay the same objects: their class is swapped for a subclass with the
same name (``print(model)`` still says ``BatchNorm2d``; ``isinstance`` holds;
state dict keys are unchanged), which pickles as torch's own class again.
"""

from __future__ import annotations

import copyreg
import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

_CONVERTIBLE = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
_SYNCED: dict[type, type] = {}


class UnsyncedBatchNormError(RuntimeError):
    """A BatchNorm subclass with a ``forward`` of its own, in a prepared model at
    more than one process: its statistics cannot be made the global batch's."""


class GradientPenaltyBatchNormError(RuntimeError):
    """A second backward (a gradient penalty) through a BatchNorm layer that
    normalises by the global batch: its first derivatives only are computed."""


_SECOND_BACKWARD = (
    "a gradient penalty differentiates the gradient of a BatchNorm layer that "
    "normalises by the global batch (torch.autograd.grad(..., create_graph=True) "
    "through a model with BatchNorm in training mode: WGAN-GP, DRAGAN or R1 with "
    "a BatchNorm critic); the runtime's global-batch BatchNorm computes first "
    "derivatives only, as torch's SyncBatchNorm does. Fix: a normalisation "
    "without batch statistics in that model (LayerNorm or InstanceNorm, as "
    "WGAN-GP's critic has), or --no-sync-batchnorm (each process then normalises "
    "by its own share, and the losses differ from the original's)"
)


class _NoSecondBackward(torch.autograd.Function):
    """Stands in the graph of gradients computed with create_graph=True: a
    backward through them raises, on every process alike."""

    @staticmethod
    def forward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        return tuple(g.view_as(g) for g in grads)

    @staticmethod
    def backward(ctx: Any, *_: Any) -> Any:
        raise GradientPenaltyBatchNormError(_SECOND_BACKWARD)


class PerProcessBatchNormWarning(UserWarning):
    """BatchNorm layers normalise by each process's own samples."""


def _reduce_dims(x: torch.Tensor) -> list[int]:
    return [0, *range(2, x.dim())]


def _shape(x: torch.Tensor) -> list[int]:
    """Broadcast a per-channel vector against ``x`` (N, C, ...)."""
    return [1, -1, *([1] * (x.dim() - 2))]


def _all_gather(tensor: torch.Tensor, group: Any) -> torch.Tensor:
    world = dist.get_world_size(group)
    parts = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(parts, tensor, group=group)
    return torch.stack(parts)


def global_statistics(
    x: torch.Tensor, group: Any = None
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Per-channel mean and biased variance of the global batch, and its count."""
    channels = x.shape[1]
    count = x.numel() // channels if channels else 0
    stats = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    dims = _reduce_dims(x)
    if count:
        # The mean accumulated in float64 (as torch's CPU BatchNorm does), the
        # variance by Welford (no cancellation of E[x^2] - E[x]^2): two fused
        # passes, no temporary the size of the input.
        mean = stats.sum(dims, dtype=torch.float64) / count
        m2 = torch.var(stats, dim=dims, correction=0).double() * count
    else:
        mean = stats.new_zeros(channels, dtype=torch.float64)
        m2 = stats.new_zeros(channels, dtype=torch.float64)
    local = torch.cat([mean, m2, mean.new_tensor([float(count)])])
    gathered = _all_gather(local, group)
    means, m2s = gathered[:, :channels], gathered[:, channels : 2 * channels]
    counts = gathered[:, 2 * channels :]
    total = counts.sum()
    if int(total.item()) == 0:
        return mean.to(stats.dtype), m2.to(stats.dtype), 0
    mean_all = (counts * means).sum(0) / total
    m2_all = (m2s + counts * (means - mean_all) ** 2).sum(0)
    return (
        mean_all.to(stats.dtype),
        (m2_all / total).to(stats.dtype),
        int(total.item()),
    )


class _SyncBatchNormFunction(torch.autograd.Function):
    """Normalise by given global statistics; backward all-reduces the two
    per-channel gradient sums. The heavy work is torch's own fused kernels."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        x: torch.Tensor,
        weight: torch.Tensor | None,
        bias: torch.Tensor | None,
        mean: torch.Tensor,
        var: torch.Tensor,
        eps: float,
        total: int,
        group: Any,
    ) -> torch.Tensor:
        # torch's BatchNorm with these statistics as its "running" ones: the same
        # fused transform (and rounding) as its training forward. Its CPU kernels
        # divide by the count: an empty slice does not go through them.
        out = (
            torch.batch_norm(
                x,
                weight,
                bias,
                mean,
                var,
                False,
                0.0,
                eps,
                torch.backends.cudnn.enabled,
            )
            if x.numel()
            else x.clone()
        )
        invstd = torch.rsqrt(var + eps)
        ctx.save_for_backward(x, weight, mean, invstd)
        ctx.eps, ctx.total, ctx.group = eps, total, group
        ctx.has_bias = bias is not None
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        with torch.no_grad():
            grads = _sync_backward(ctx, grad_out)
        if not torch.is_grad_enabled():
            return grads
        # create_graph=True: what differentiates these gradients again (a
        # gradient penalty) must stop loudly, not go on without their second
        # derivative (torch's once_differentiable, with our own error).
        present = [g.detach().requires_grad_() for g in grads if g is not None]
        wrapped = _NoSecondBackward.apply(*present)
        out = iter(wrapped if isinstance(wrapped, tuple) else (wrapped,))
        return tuple(None if g is None else next(out) for g in grads)


def _sync_backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
    """The gradients of _SyncBatchNormFunction's inputs (all-reduces two
    per-channel sums)."""
    x, weight, mean, invstd = ctx.saved_tensors
    shape, channels = _shape(x), x.shape[1]
    grad_out = grad_out.contiguous()
    # sum(grad) and sum(grad * xhat) per channel, in one fused pass.
    if x.numel():
        _, sum_grad_xhat, sum_grad = torch.ops.aten.native_batch_norm_backward(
            grad_out,
            x,
            weight,
            None,
            None,
            mean,
            invstd,
            True,
            ctx.eps,
            [False, True, True],
        )
    else:
        sum_grad = sum_grad_xhat = invstd.new_zeros(channels)
    # Every rank reaches this collective: all ran the same forward (global
    # mode gives each rank a slice, an empty one included, of every batch).
    sums = torch.cat([sum_grad, sum_grad_xhat]).to(invstd.dtype)
    dist.all_reduce(sums, group=ctx.group)
    mean_grad = sums[:channels] / ctx.total
    mean_grad_xhat = sums[channels:] / ctx.total
    # grad_x = w * invstd * (g - mean(g) - xhat * mean(g * xhat)), as
    # b * (x - mean) + c + a * g with per-channel a, b, c: one temporary,
    # updated in place. Centred first: x * b + c would cancel where the
    # mean is large next to the spread.
    a = invstd if weight is None else invstd * weight.to(invstd.dtype)
    b = -a * invstd * mean_grad_xhat
    c = -a * mean_grad
    grad_x = x - mean.view(shape).to(x.dtype)
    grad_x.mul_(b.view(shape).to(x.dtype)).add_(c.view(shape).to(x.dtype))
    grad_x.addcmul_(grad_out, a.view(shape).to(x.dtype))
    grad_weight = (
        sum_grad_xhat.to(weight.dtype)
        if weight is not None and ctx.needs_input_grad[1]
        else None
    )
    grad_bias = (
        sum_grad.to(weight.dtype if weight is not None else grad_out.dtype)
        if ctx.has_bias and ctx.needs_input_grad[2]
        else None
    )
    return grad_x, grad_weight, grad_bias, None, None, None, None, None


def _synced_forward(self: _BatchNorm, x: torch.Tensor) -> torch.Tensor:
    self._check_input_dim(x)
    # As torch's _BatchNorm.forward: which statistics, and how fast they move.
    factor = 0.0 if self.momentum is None else self.momentum
    if self.training and self.track_running_stats:
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
    if not self.training:
        # Eval mode: running statistics (or, with track_running_stats=False, the
        # process's own batch, as torch's SyncBatchNorm does): no collective, so an
        # evaluation that only the main process runs cannot hang.
        return _BatchNorm.forward(self, x)  # type: ignore[no-any-return]
    group = getattr(self, "_accel_group", None)
    mean, var, total = global_statistics(x, group)
    if total <= 1:
        raise ValueError(
            f"Expected more than 1 value per channel when training, got input size "
            f"{list(x.shape)} on this process and {total} value(s) per channel over "
            f"the global batch"
        )
    if self.track_running_stats and self.running_mean is not None:
        with torch.no_grad():
            unbiased = var * (total / (total - 1))
            self.running_mean.mul_(1 - factor).add_(
                mean.to(self.running_mean.dtype), alpha=factor
            )
            self.running_var.mul_(1 - factor).add_(
                unbiased.to(self.running_var.dtype), alpha=factor
            )
    return _SyncBatchNormFunction.apply(
        x, self.weight, self.bias, mean, var, self.eps, total, group
    )


def _reduce_ex(self: nn.Module, protocol: Any) -> Any:
    # Pickled (torch.save(model), copy.deepcopy) as torch's own class: loading it
    # needs nothing of accel-migrate. copyreg._reconstructor is what protocols 0
    # and 1 use for any object; the state is the module's, unchanged.
    base = type(self).__mro__[1]
    state = object.__reduce_ex__(self, 2)[2]
    return (copyreg._reconstructor, (base, object, None), state)


def synced_subclass(
    cls: type, cache: dict[type, type], module: str, method: str, function: Any
) -> type:
    """The subclass of ``cls`` of the same name whose ``method`` is ``function``,
    made once (``cache``) in ``module`` and pickled as ``cls`` itself
    (``_reduce_ex``): this module's layers' and sync_instancenorm's."""
    if cls not in cache:
        cache[cls] = type(
            cls.__name__,
            (cls,),
            {
                "__module__": module,
                "__qualname__": cls.__qualname__,
                method: function,
                "__reduce_ex__": _reduce_ex,
                "_accel_synced": True,
            },
        )
    return cache[cls]


def synced_class(cls: type) -> type:
    """The subclass of ``cls`` that normalises by the global batch (same name)."""
    return synced_subclass(cls, _SYNCED, __name__, "forward", _synced_forward)


def batchnorm_layers(module: nn.Module) -> list[nn.Module]:
    """torch's BatchNorm layers (or subclasses keeping its forward) in ``module``."""
    return [
        m
        for m in module.modules()
        if isinstance(m, _CONVERTIBLE)
        and not getattr(m, "_accel_synced", False)
        and type(m).forward is _BatchNorm.forward
    ]


def convert(module: nn.Module, group: Any = None) -> int:
    """Make every BatchNorm layer of ``module`` normalise by the global batch.

    The layers are changed in place (their parameters, buffers and state dict
    keys stay); returns how many were converted.
    """
    layers = batchnorm_layers(module)
    for layer in layers:
        layer.__class__ = synced_class(type(layer))
        if group is not None:
            layer._accel_group = group  # type: ignore[assignment]
    return len(layers)


_WARNED = False


def _warn_per_process(reason: str) -> None:
    global _WARNED
    if _WARNED:
        return
    _WARNED = True
    warnings.warn(
        f"BatchNorm statistics are per-process ({reason}): in train mode each "
        "process normalises by its own samples, so losses differ from the original "
        "script's at more than one process",
        PerProcessBatchNormWarning,
        stacklevel=3,
    )


def prepare(module: nn.Module, runtime: Any) -> None:
    """Called when a prepared model's strategy wrapper is built (first forward).

    Global-batch mode with several processes: convert the BatchNorm layers.
    Opted out, or per-device batches: warn once (main process) that the
    statistics are per-process.
    """
    env = runtime.env
    if not env.distributed or not dist.is_initialized():
        return
    if not any(isinstance(m, _BatchNorm) for m in module.modules()):
        return
    config = runtime.config
    if config.batch_mode == "per-device":
        if env.is_main:
            _warn_per_process("batch mode per-device")
        return
    if not config.sync_batchnorm:
        if env.is_main:
            _warn_per_process(
                f"sync-batchnorm off, from {config.source_of('sync_batchnorm')}"
            )
        return
    convert(module)
    for layer in unconverted(module):
        layer.register_forward_pre_hook(_refuse_per_process(env.world_size))


def unconverted(module: nn.Module) -> list[nn.Module]:
    """The BatchNorm layers of ``module`` that ``convert`` left per-process:
    subclasses with a ``forward`` of their own (torch's ``SyncBatchNorm``
    synchronises itself, on CUDA; it refuses CPU tensors)."""
    return [
        layer
        for layer in module.modules()
        if isinstance(layer, _BatchNorm)
        and not getattr(layer, "_accel_synced", False)
        and not isinstance(layer, nn.SyncBatchNorm)
    ]


def _refuse_per_process(world_size: int) -> Any:
    """A pre-hook that stops a train-mode forward of a BatchNorm layer the
    runtime could not convert (a subclass with a ``forward`` of its own).

    Every process runs the same forwards, so every one stops at the same one:
    in train mode such a layer would normalise by each process's share, and the
    losses would differ from the original's with nothing said. In eval mode it
    uses its running statistics, which is per-sample: it runs."""

    def hook(layer: nn.Module, args: Any) -> None:
        if not layer.training:
            return
        raise UnsyncedBatchNormError(
            f"BatchNorm layer {type(layer).__name__} has a forward of its own, so "
            "the runtime cannot make it normalise by the global batch (it converts "
            "the layers that keep torch's forward): in train mode at "
            f"{world_size} processes its statistics would be each process's own "
            "and the losses would differ from the original's. Launch with "
            "--no-sync-batchnorm (sync-batchnorm = false) to accept per-process "
            "statistics"
        )

    return hook


__all__ = [
    "PerProcessBatchNormWarning",
    "UnsyncedBatchNormError",
    "batchnorm_layers",
    "convert",
    "global_statistics",
    "prepare",
    "synced_class",
]
