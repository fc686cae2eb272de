"""The functions migrated scripts call. Module-level, so nothing has to be threaded
through the user's functions and classes.

With no torchrun variables set the script is one process and every call is the
identity or the plain PyTorch call: ``python train.py`` still runs it.
"""

from __future__ import annotations

import builtins
import os
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
from torch import nn
from torch.utils.data import DataLoader

from . import checkpoint_keys as _checkpoint
from . import closures as _closures
from . import data as _data
from . import empty_share as _empty_share
from . import guards as _guards
from . import loss_share as _loss_share
from . import progress as _progress
from ._state import current_env as _env
from ._state import get_runtime, peek_runtime
from .comm import ReduceOp
from .loss_share import Reduction
from .module import PreparedModule, prepared_class
from .saving import load as load
from .saving import save as save

T = TypeVar("T")
M = TypeVar("M", bound=nn.Module)
Opt = TypeVar("Opt", bound=torch.optim.Optimizer)


# -- where am I ---------------------------------------------------------------------------
def device(accelerator: bool = True) -> torch.device:
    """This process's device: its local GPU when there is one, else the CPU.

    ``accelerator=False`` keeps the whole run on the CPU (a script's ``--no-cuda``);
    it must come before any other runtime call.
    """
    return get_runtime(accelerator).device


def rank() -> int:
    return _env().rank


def local_rank() -> int:
    return _env().local_rank


def world_size() -> int:
    return _env().world_size


def is_main_process() -> bool:
    return _env().is_main


def is_local_main_process() -> bool:
    """The first process of this machine (``LOCAL_RANK`` 0): one per node."""
    return _env().local_rank == 0


def barrier() -> None:
    get_runtime().comm.barrier()


# -- preparing the script's objects ------------------------------------------------------
def prepare_model(module: M) -> M:
    """Move the model to this process's device and run it through the strategy."""
    if isinstance(module, PreparedModule):
        return module  # type: ignore[return-value]
    if not isinstance(module, nn.Module):
        raise TypeError(
            f"prepare_model expects a torch.nn.Module, got {type(module).__name__}"
        )
    runtime = get_runtime()
    if runtime.passthrough:
        runtime.track_module(module)  # for accel.save_state, nothing more
        return module
    module.to(runtime.device)
    prepared = prepared_class(module)(module, runtime)
    runtime.track_module(prepared)
    return prepared  # type: ignore[return-value]


def prepare_optimizer(optimizer: Opt) -> Opt:
    """Register the optimizer: the strategy and precision may hook its step."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"prepare_optimizer expects a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    runtime = get_runtime()
    if optimizer in runtime.optimizers():
        return optimizer
    runtime.track_optimizer(optimizer)
    if runtime.passthrough:
        return optimizer
    if runtime.env.distributed:
        _guards.guard_first_step(runtime, optimizer)
    runtime.strategy.setup_optimizer(optimizer)
    if runtime.precision.hooks_optimizer_step:
        _route_step(optimizer, runtime.precision)
    if runtime.env.distributed:
        _closures.global_closures(optimizer)  # LBFGS decides on the closure's loss
    return optimizer


def _route_step(optimizer: torch.optim.Optimizer, precision: Any) -> None:
    """Send ``optimizer.step()`` through the precision plugin (fp16: skip on inf)."""
    original = optimizer.step

    def step(opt: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        return precision.optimizer_step(opt, original, *args, **kwargs)

    # A bound method, as LR schedulers expect when they wrap `step` in turn.
    optimizer.step = types.MethodType(step, optimizer)  # type: ignore[method-assign]


def prepare_dataloader(loader: DataLoader) -> DataLoader:
    """Give this rank its share of every batch (see ``runtime.data``).

    Run as a plain script, the loader is returned untouched. Under ``launch`` it is
    sharded in place, with one process too: the batches are then the original's,
    and the loader can resume mid-epoch from ``accel.load_state``.
    """
    runtime = get_runtime()
    if not runtime.env.launched:
        return loader
    sharded = _data.shard_loader(loader, runtime)
    runtime.track_loader(sharded)
    return sharded


def prepare_dataloaders(values: Iterable[Any]) -> tuple[Any, ...]:
    """``prepare_dataloader`` of each DataLoader among ``values`` (the tuple a
    helper returns: ``train_loader, val_loader, None, num_class``); ``None``,
    numbers and anything else are handed back as they are, in their places."""
    return tuple(
        prepare_dataloader(value) if isinstance(value, DataLoader) else value
        for value in values
    )


def unwrap(module: nn.Module) -> nn.Module:
    """The user's module behind a prepared one."""
    return module.original_module if isinstance(module, PreparedModule) else module


# -- the training step ---------------------------------------------------------------------
def backward(
    loss: torch.Tensor | Sequence[torch.Tensor],
    gradient: torch.Tensor | Sequence[torch.Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
    *,
    reduction: Reduction = "mean",
    count: Any = None,
) -> None:
    """``loss.backward()``, weighted so that averaged gradients are those of the
    global batch, and scaled by the precision plugin.

    ``loss`` may be a sequence of tensors (``torch.autograd.backward([l1, l2])``,
    with ``gradient`` a sequence too); each gets the same weight and loss scale.
    ``reduction`` says how the loss reduces the batch: ``"mean"`` over samples
    (every ``torch.nn`` loss's default), or ``"sum"``. A mean over something
    else than samples, tokens of a padded batch, passes ``count``: the number
    of elements this rank's loss averages over (``(target != pad).sum()``); the
    counts are summed across ranks, so the gradient is that of the global mean.
    With ``count`` this is one more small collective per call.
    """
    runtime = get_runtime()
    _progress.backward()  # (where a late statement's check looks)
    with _progress.inside():  # (blocked here: the others' reductions)
        losses = _loss_share.as_tensors(loss)
        if not runtime.backward_guarded:
            _guards.check_backward(runtime, losses)
        shares = runtime.take_step_shares()
        if reduction == "mean" and count is None and runtime.env.distributed:
            _loss_share.check_one_share(
                shares, runtime.env.world_size, runtime.env.rank
            )
        share = _loss_share.loss_share(runtime, reduction, count)
        fraction = share.fraction
        runtime.record_losses(losses, fraction)
        if losses:
            # (of a sequence, the first: the overlap follows the order of the calls)
            runtime.start_loss_reduce(losses[0])
        weight = runtime.env.world_size * fraction if runtime.env.distributed else 1.0
        if weight != 1.0:
            losses = [tensor * weight for tensor in losses]
        scaled = [runtime.precision.scale_loss(tensor) for tensor in losses]
        with _empty_share.empty_share_backward(runtime, share.empty):
            runtime.strategy.backward(
                scaled[0] if isinstance(loss, torch.Tensor) else scaled,
                gradient,
                retain_graph,
                create_graph,
                inputs,
            )
        runtime.after_backward()
        runtime.check_first_backward()


@contextmanager
def no_sync(module: nn.Module) -> Iterator[None]:
    """Skip the gradient exchange for backward passes inside (gradient accumulation)."""
    runtime = get_runtime()
    forward_module = (
        module.forward_module if isinstance(module, PreparedModule) else None
    )
    with runtime.strategy.no_sync(forward_module):
        yield


def clip_grad_norm_(
    parameters: Iterable[torch.Tensor] | torch.Tensor,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> torch.Tensor:
    """The global gradient norm across shards, after unscaling fp16 gradients."""
    runtime = get_runtime()
    for optimizer in runtime.optimizers():
        runtime.precision.unscale_gradients(optimizer)
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    norm = runtime.strategy.clip_grad_norm_(list(parameters), max_norm, norm_type)
    if error_if_nonfinite and not torch.isfinite(norm):
        raise RuntimeError(
            f"the total norm of order {norm_type} of the gradients is non-finite, so it "
            f"cannot be clipped (error_if_nonfinite=True)"
        )
    return norm


def clip_grad_value_(
    parameters: Iterable[torch.Tensor] | torch.Tensor, clip_value: float
) -> None:
    """``torch.nn.utils.clip_grad_value_`` after unscaling fp16 gradients."""
    runtime = get_runtime()
    for optimizer in runtime.optimizers():
        runtime.precision.unscale_gradients(optimizer)
    torch.nn.utils.clip_grad_value_(parameters, clip_value)


def global_loss(
    loss: torch.Tensor | None, reduction: Reduction | None = None, count: Any = None
) -> torch.Tensor | None:
    """The loss of the whole global batch: each rank's mean weighted by its share.

    A loss given to ``accel.backward`` (or its ``.data``, ``.detach()``) is
    combined as it was weighted there: the sum of the ranks' sums for
    ``reduction="sum"``, token-weighted for a ``count``. Another tensor is a
    mean over samples unless ``reduction``/``count`` say otherwise (the same
    meaning as for ``accel.backward``; ``count`` is then one more collective).

    A collective. For the loss last given to ``accel.backward`` the reduction is
    started during the backward pass once the script has shown that it asks for
    it every step (see ``Runtime.start_loss_reduce``), so it costs a wait, not a
    round trip.

    ``None`` is an optional value (ConvNeXt's ``metric_logger.update(class_acc=None)``
    when Mixup is on; ``acc = ... if len(y) else None`` on a rank whose share of a
    short last batch is empty). It still takes part in the collective, with no
    share: the result is the mean over the ranks that have a value, as one
    process had the value of the whole batch, and ``None`` when no rank has one.
    """
    if reduction is not None or count is not None:
        _loss_share.check_reduction(reduction or "mean", count)
    runtime = peek_runtime()
    if runtime is None or not runtime.env.distributed:
        return loss
    if loss is None:
        if count is not None:  # the others sum their counts: take part
            _loss_share.loss_fraction(runtime, reduction or "mean", count)
        return runtime.global_loss(None)
    if reduction is None and count is None:
        return runtime.global_loss(loss)
    fraction = _loss_share.loss_fraction(runtime, reduction or "mean", count)
    return runtime.global_loss(loss, fraction)


# -- metrics and output ----------------------------------------------------------------------
def _reduce_numpy(comm: Any, value: Any, op: ReduceOp) -> Any:
    """``reduce`` of a numpy scalar or array: the same type back (a float for the
    mean of an integer, as for a Python int). Integers are combined as int64
    (gloo has no unsigned types but uint8), floats in their own precision (the
    mean in float64, then back), and a scalar whose sum no longer fits its type
    comes back as an int64."""
    import numpy as np

    if isinstance(value, np.ndarray):
        kind = value.dtype.kind
        if value.dtype == np.bool_ or kind not in "iuf":
            raise TypeError(
                f"accel.reduce cannot combine a numpy array of {value.dtype}"
            )
        native = value.dtype.newbyteorder("=")
        if kind == "f":
            work, back = (np.float64 if op == "mean" else native), native
        else:
            work, back = (
                (np.float64, np.float64) if op == "mean" else (np.int64, native)
            )
        tensor = torch.from_numpy(np.ascontiguousarray(value.astype(work)))
        return comm.all_reduce(tensor, op).numpy().astype(back)
    if isinstance(value, np.bool_) or not isinstance(value, (np.integer, np.floating)):
        raise TypeError(f"accel.reduce cannot combine a {type(value).__name__}")
    floating = isinstance(value, np.floating)
    dtype = torch.float64 if floating or op == "mean" else torch.int64
    result = comm.all_reduce(torch.tensor(value.item(), dtype=dtype), op).item()
    if op == "mean" and not floating:
        return result
    try:
        return value.dtype.type(result)
    except OverflowError:
        return np.int64(result)


def reduce(value: T, op: ReduceOp = "sum") -> T:
    """Combine a tensor or number (or a list, tuple or dict of them) across ranks.

    Numbers come back as the same type: an int count stays an int.
    """
    env = _env()
    if not env.distributed:
        return value
    comm = get_runtime().comm
    if isinstance(value, torch.Tensor):
        return comm.all_reduce(value, op)  # type: ignore[return-value]
    if type(value).__module__ == "numpy":
        # `total_correct += np.sum(predicted == target)`: a numpy int64 count
        # (torchdiffeq's accuracy()), or an array of them
        return _reduce_numpy(comm, value, op)
    if isinstance(value, bool) or not isinstance(
        value, (int, float, list, tuple, dict)
    ):
        raise TypeError(f"accel.reduce cannot combine a {type(value).__name__}")
    if isinstance(value, (int, float)):
        dtype = (
            torch.int64 if isinstance(value, int) and op != "mean" else torch.float64
        )
        result = comm.all_reduce(torch.tensor(value, dtype=dtype), op).item()
        return type(value)(result) if op != "mean" else result  # type: ignore[return-value]
    if isinstance(value, dict):
        return {key: reduce(item, op) for key, item in value.items()}  # type: ignore[return-value]
    return type(value)(reduce(item, op) for item in value)  # type: ignore[return-value]


def gather(value: Any) -> Any:
    """Tensors: concatenated along dim 0 in rank order. Anything else: a list per rank."""
    if not _env().distributed:
        return value if isinstance(value, torch.Tensor) else [value]
    comm = get_runtime().comm
    if isinstance(value, torch.Tensor):
        parts = comm.all_gather(value)
        return torch.stack(parts) if value.dim() == 0 else torch.cat(parts)
    return comm.all_gather_object(value)


def print(*args: Any, **kwargs: Any) -> None:
    """``print`` on the main process only."""
    if _env().is_main:
        builtins.print(*args, **kwargs)


# -- checkpoints -------------------------------------------------------------------------------
def state_dict(obj: Any, prefix: str = "") -> Any:
    """The full state dict with the original keys (no ``module.`` prefix).

    ``prefix="module."`` writes the keys ``nn.DataParallel`` (or DDP) gave the
    original script, ``module.conv1.weight``: a checkpoint that code which wraps
    the model before loading reads as it is.
    """
    state = obj.state_dict()  # a PreparedModule answers through its strategy
    return _checkpoint.add_prefix(state, prefix) if prefix else state


def load_state_dict(obj: Any, state: Mapping[str, Any], strict: bool = True) -> Any:
    """``obj.load_state_dict(state)``; a model also takes the keys of a model that
    was wrapped in ``nn.DataParallel`` or DDP (``module.conv1.weight``), as the
    original script wrote them."""
    if isinstance(obj, nn.Module):
        state = _checkpoint.without_wrapper_prefix(unwrap(obj), state)
        return obj.load_state_dict(state, strict=strict)
    return obj.load_state_dict(state)


# -- resuming ----------------------------------------------------------------------------------
def save_state(directory: str | os.PathLike[str], *objects: Any, **values: Any) -> None:
    """Save everything needed to resume: prepared models and optimizers, the loss
    scale, ``objects`` (LR schedulers: anything with ``state_dict``), small
    ``values`` (``epoch=3``), and per rank the RNG states and data positions.

    A collective: every rank calls it. The folder is replaced atomically.
    """
    from .checkpoint import save_state as _save

    _save(get_runtime(), directory, objects, values)


def load_state(directory: str | os.PathLike[str], *objects: Any) -> Any:
    """Restore what ``save_state`` saved; None when there is nothing to resume.

    Returns ``Resume(epoch, step, values)``: run the epoch loop from ``epoch``; the
    prepared loaders continue that epoch at ``step`` with the same samples.
    """
    from .checkpoint import load_state as _load

    return _load(get_runtime(), directory, objects)
