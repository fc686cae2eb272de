"""The process-wide runtime, created lazily at the first call that needs it."""

from __future__ import annotations

import atexit
import gc
import os
import sys
import weakref
from typing import Any

import torch
from torch import nn

from .comm import Collectives, PendingReduce, ProcessGroupCollectives
from .config import ConfigError, RuntimeConfig, load_config
from .drift import DriftCheck
from .env import DONE_DIR_VARIABLE, DistEnv
from .faults import mark_failed, peer_gone, process_failed, report_stopped
from .loss_share import (
    RecordedLoss,
    shares_last,
    shares_packet,
    shares_result,
    sum_shares,
)
from .module import PreparedModule
from .precision import Precision, precision_class
from .strategies import Strategy, strategy_class
from .strategies.base import optimizers_holding


def pick_device(env: DistEnv, accelerator: bool) -> torch.device:
    if accelerator and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if env.local_rank >= count:
            raise ConfigError(
                f"local rank {env.local_rank} has no GPU: this node has {count}; "
                f"launch at most {count} processes per node"
            )
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def resolve_strategy_name(config: RuntimeConfig, env: DistEnv) -> str:
    if config.strategy == "auto":
        return "ddp" if env.distributed else "single"
    return config.strategy


class Runtime:
    """Everything the module-level API needs: place in the job, device, plugins."""

    def __init__(
        self, config: RuntimeConfig, env: DistEnv, accelerator: bool = True
    ) -> None:
        self.config = config
        self.env = env
        strategy_cls: type[Strategy] = strategy_class(
            resolve_strategy_name(config, env)
        )
        strategy_cls.check(env, config)
        self.device = pick_device(env, accelerator)
        # DDP or FSDP asked for by name under the launcher needs a process group
        # even in a world of one (`launch --nproc 1 --strategy ddp`).
        self.comm: Collectives = (
            ProcessGroupCollectives(
                env,
                self.device,
                config.timeout,
                host_tensors=strategy_cls.host_collectives(config),
            )
            if env.distributed or (env.launched and strategy_cls.distributed)
            else Collectives(env, self.device)
        )
        self.precision: Precision = precision_class(
            strategy_cls.name, config.precision
        )(self.device, self.comm)
        self.strategy: Strategy = strategy_cls(
            env, self.device, self.comm, self.precision, config
        )
        self._modules: list[weakref.ref[nn.Module]] = []
        self._optimizers: list[weakref.ref[torch.optim.Optimizer]] = []
        self._loaders: list[weakref.ref[Any]] = []
        self._batch_share: tuple[int, int] | None = None
        #: Per pass over a sharded loader, still open, that has yielded since the
        #: last backward: its batch's share (local, total).
        self._step_shares: dict[int, tuple[int, int]] = {}
        self._backward_checked = False
        # Set once guards.check_backward has run (never needed in a world of one).
        self.backward_guarded = not env.distributed
        # Copies of the prepared models compared at the first batches (drift.py);
        # None once done, and in a world of one.
        self.drift_check: DriftCheck | None = DriftCheck() if env.distributed else None
        # accel.global_loss of the loss given to accel.backward: see start_loss_reduce.
        self._last_backward_loss: weakref.ref[torch.Tensor] | None = None
        # (the loss, its reduction started in backward, its weighted value)
        self._loss_in_flight: (
            tuple[weakref.ref[torch.Tensor], PendingReduce, torch.Tensor] | None
        ) = None
        self._reduce_during_backward = False
        # Where the script's accel.global_loss asks for it (where a rank with
        # None takes part in that reduction: see global_loss), and how many
        # calls each site made since the last accel.backward.
        self._reduce_site: Site | None = None
        self._site_calls: dict[tuple[tuple[str, int], ...], int] = {}
        # True while accel.backward runs the backward of an empty share (empty_share.py)
        self.empty_share_backward = False
        # The tensors of the last accel.backward and their fractions of the global
        # loss, so that accel.global_loss weighs a logged loss as it was trained.
        self._recorded_losses: list[RecordedLoss] = []

    @property
    def passthrough(self) -> bool:
        """True when the script runs exactly as written: one process, fp32."""
        return not self.strategy.distributed and type(self.precision) is Precision

    # -- bookkeeping -----------------------------------------------------------------
    def track_module(self, module: nn.Module) -> None:
        self._modules.append(weakref.ref(module))

    def track_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        self._optimizers.append(weakref.ref(optimizer))

    def track_loader(self, loader: Any) -> None:
        if loader not in self.loaders():
            self._loaders.append(weakref.ref(loader))

    def loaders(self) -> list[Any]:
        return [loader for ref in self._loaders if (loader := ref()) is not None]

    def models(self) -> list[nn.Module]:
        """Every prepared model, in the order the script prepared them."""
        return [m for ref in self._modules if (m := ref()) is not None]

    def modules(self) -> list[PreparedModule]:
        return [m for m in self.models() if isinstance(m, PreparedModule)]

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [o for ref in self._optimizers if (o := ref()) is not None]

    def on_module_ready(self, module: PreparedModule) -> None:
        """The strategy built the forward module; optimizers may need new parameters."""
        for optimizer in self.optimizers():
            self.strategy.setup_optimizer(optimizer)

    # -- the current step's share of the global batch ------------------------------------
    def set_batch_share(
        self, local: int, total: int, source: int | None = None
    ) -> None:
        """The share of the batch a sharded loader's pass (``source``) yields now."""
        self._batch_share = (local, total)
        if source is not None:
            self._step_shares[source] = (local, total)

    def end_batch_shares(self, source: int) -> None:
        """A pass over a sharded loader ended (exhausted, left or closed): its
        batches are no longer the step's."""
        self._step_shares.pop(source, None)

    def take_step_shares(self) -> list[tuple[int, int]]:
        """The shares of the open passes that yielded since the last backward
        (then forgotten: a backward ends a step's batches)."""
        shares = list(self._step_shares.values())
        self._step_shares.clear()
        return shares

    def loss_weight(self) -> float:
        """Factor that makes the averaged gradient that of the global-batch mean loss."""
        if self._batch_share is None:
            return 1.0
        local, total = self._batch_share
        return local * self.env.world_size / total if total else 1.0

    def batch_share(self) -> tuple[int, int]:
        """(this rank's samples, the global batch's) of the current step."""
        if self._batch_share is None:
            raise RuntimeError("no sharded loader has yielded a batch yet")
        return self._batch_share

    def batch_share_known(self) -> bool:
        """Has a sharded loader said which part of the global batch this rank holds?"""
        return self._batch_share is not None

    def batch_fraction(self) -> float:
        if self._batch_share is None:
            return 1.0 / self.env.world_size
        local, total = self._batch_share
        return local / total if total else 0.0

    # -- the global-batch loss -----------------------------------------------------------
    def _share(
        self, loss: torch.Tensor, fraction: float | None = None
    ) -> tuple[torch.Tensor, float]:
        """``loss`` weighted by its fraction of the global loss, and that
        fraction (``fraction`` when given, else the one ``accel.backward`` used
        for it): what this rank sends, in backward and in ``global_loss``."""
        if fraction is None:
            fraction = self.recorded_fraction(loss)
        local = loss.detach().float()
        return (local * fraction if fraction else torch.zeros_like(local)), fraction

    def recorded_fraction(self, loss: torch.Tensor) -> float:
        """The fraction ``loss`` was weighted by in the last ``accel.backward``
        (a sum-reduced or token-mean loss), else a sample-mean's."""
        for recorded in self._recorded_losses:
            if recorded.matches(loss):
                return recorded.fraction
        return self.batch_fraction()

    def record_losses(self, losses: list[torch.Tensor], fraction: float) -> None:
        self._recorded_losses = [RecordedLoss.of(t, fraction) for t in losses]

    def start_loss_reduce(self, loss: torch.Tensor) -> None:
        """Called by ``accel.backward`` before the backward pass, after
        ``record_losses``.

        A migrated loop asks for the global loss of every loss it backpropagates
        (``total += accel.global_loss(loss).item()``), a collective of its own
        each step. Once the script has shown that pattern, the reduction of each
        new loss starts here, asynchronously, and runs while backward computes;
        ``global_loss`` then only waits for a result that is already there. The
        decision depends only on the order of the script's calls, so every rank
        starts the same collectives in the same order; a reduction nobody asked
        for is completed at the next backward, and the overlap is stopped.
        """
        if not self.env.distributed:
            return
        if self._loss_in_flight is not None:
            self._loss_in_flight[1].result()
            self._loss_in_flight = None
            self._reduce_during_backward = False
        self._site_calls.clear()
        self._last_backward_loss = weakref.ref(loss)
        if self._reduce_during_backward and loss.numel() == 1:
            weighted, fraction = self._share(loss)
            packet = shares_packet(self.comm, weighted, fraction, last=True)
            self._loss_in_flight = (
                weakref.ref(loss),
                self.comm.all_reduce_async(packet, "sum"),
                weighted,
            )

    def _site(self) -> Site | None:
        """This call's site: every frame of the script's (file, line), and how
        many calls it made since the last ``accel.backward`` (this one too)."""
        frames = _script_frames()
        if not frames:
            return None
        calls = self._site_calls.get(frames, 0) + 1
        self._site_calls[frames] = calls
        return frames, calls

    def global_loss(
        self, loss: torch.Tensor | None, fraction: float | None = None
    ) -> torch.Tensor | None:
        """Each rank's loss weighted by its fraction of the global loss, summed:
        ``fraction`` when given, else the one ``accel.backward`` used for it. A
        rank with ``None`` takes part with no share (see ``sum_shares``).

        One all-reduce of the value with its facts (has a value, fraction,
        shape), on the device: a rank with a value reads nothing back (no device
        sync), a rank with ``None`` reads the facts. The reduction of the loss
        last given to ``accel.backward`` is started in the backward pass once
        the script has asked for it (``start_loss_reduce``), with the same
        facts; a rank with ``None`` at the call that asked for it (its site:
        ``_site``; ``accel.global_loss(loss if len(y) else None)``) takes part
        in that one, as the others do; at any other call it takes part in a
        new all-reduce, as the others do with their other value there. (A
        ``None`` written at another line than the loss's, in an if/else,
        cannot be told from that: documented, write it as one call.) Whether
        the script asked is decided from the facts, the same on every rank."""
        site = self._site()
        in_flight = self._loss_in_flight
        if loss is None:
            if in_flight is not None and site is not None and site == self._reduce_site:
                self._loss_in_flight = None
                return self._none_in_flight(in_flight[1], in_flight[2])
            # Elsewhere the others pass another value (a metric None on an
            # empty share) and reduce it anew: so does this rank, and the
            # pending reduction waits for the call that asked for it.
            sums = self.comm.all_reduce(shares_packet(self.comm, None, 0.0), "sum")
            if not self._reduce_during_backward and shares_last(sums):
                self._reduce_during_backward, self._reduce_site = True, site
            return shares_result(self.comm, sums, None)
        last = False
        if fraction is None:
            if in_flight is not None and in_flight[0]() is loss:
                self._loss_in_flight = None
                return shares_result(self.comm, in_flight[1].result(), in_flight[2])
            last_loss = self._last_backward_loss
            last = last_loss is not None and last_loss() is loss
        weighted, fraction = self._share(loss, fraction)
        result = sum_shares(self.comm, weighted, fraction, last=last)
        if last:  # (a rank with None learns it from the packets: above)
            self._reduce_during_backward, self._reduce_site = True, site
        return result

    def _none_in_flight(
        self, pending: PendingReduce, weighted: torch.Tensor
    ) -> torch.Tensor | None:
        """``accel.global_loss(None)`` at the call that asked for the reduction
        started in backward: this rank takes part in it, as the others do.

        Its result counts this rank's backward loss; the value without it (the
        synchronous path's: a rank with None counts nothing) is the same where
        that loss weighed nothing (an empty share: fraction 0, or a sum over
        nothing); else the ranks could only agree with one more collective."""
        sums = pending.result()
        if bool((weighted != 0).any()):
            raise LossSiteError(
                f"accel.global_loss(None) on rank {self.env.rank}, whose loss "
                "given to accel.backward holds a share of the global loss: "
                "the others count it, this rank would not; pass that loss, or "
                "None only where this rank's share of the batch is empty"
            )
        return shares_result(self.comm, sums, None)

    def after_backward(self) -> None:
        """Let the strategy see each prepared model after a backward pass (DDP: a
        model whose backward left parameters without gradients is averaged here and
        rebuilt with find_unused_parameters, see ``strategies.ddp``)."""
        if not self.strategy.distributed:
            return
        for module in self.modules():
            forward_module = module.forward_module
            if forward_module is not None:
                replacement = self.strategy.after_backward(forward_module)
                if replacement is not None:
                    module.replace_forward_module(replacement)

    def check_first_backward(self) -> None:
        """Catch gradients that bypassed the prepared forward (and so were never synced)."""
        if self._backward_checked:
            return
        self._backward_checked = True
        if not self.optimizers():
            self._check_manual_updates()
        for module in self.modules():
            if module.forward_module is None and any(
                p.grad is not None for p in module.original_module.parameters()
            ):
                raise RuntimeError(
                    "a prepared model received gradients but was never called: call the "
                    "model itself (model(x)), not one of its submodules or methods, so "
                    "that its gradients are averaged across processes"
                )

    def _check_manual_updates(self) -> None:
        """A script without a prepared optimizer updates the parameters by hand."""
        if self.precision.hooks_optimizer_step:
            # Only a prepared optimizer's step divides the loss scale back out: the
            # update would use gradients 65536 times too large.
            raise ConfigError(
                f"precision {self.precision.name} scales the loss, and only a prepared "
                "optimizer's step removes that scale again, but this script has no "
                "prepared optimizer (it updates the parameters by hand?): wrap the "
                "optimizer in accel.prepare_optimizer(...), or use --precision bf16 or fp32"
            )
        if (
            self.strategy.shards_parameters
            and self.modules()
            and not optimizers_holding(
                {p for m in self.modules() for p in m.parameters()}
            )
        ):
            # In-place updates of the shards by hand were measured to drift from
            # the original after an evaluation pass (fixtures/realworld/manual_sgd.py
            # at world 2: 7.5e-2): refused rather than trained wrong.
            raise ConfigError(
                f"strategy {self.strategy.name} shards the parameters, and updates made "
                "by hand (p.data.add_(...)) without a prepared optimizer are not "
                "supported: wrap an optimizer in accel.prepare_optimizer(...), or use "
                "--strategy ddp"
            )

    def close(self) -> None:
        # A DistributedDataParallel still alive when its process group is destroyed
        # can abort the process at exit (seen with gloo); release the wrappers first.
        if self._loss_in_flight is not None:
            pending, self._loss_in_flight = self._loss_in_flight[1], None
            self._finish_reduction(pending)
        for module in self.modules():
            module.release_forward_module()
        gc.collect()
        _mark_finished(self.env.rank)
        self.comm.close()

    def _finish_reduction(self, pending: PendingReduce) -> None:
        """Wait for a loss reduction nobody asked for, at exit. This runs as an
        atexit hook: an error escaping it would print a second traceback ("Exception
        ignored in atexit callback") under the failing rank's. A process already
        failing (its error is reported) does not wait; a peer gone meanwhile gets
        the same one line as in a collective of the script."""
        if process_failed():
            return
        try:
            pending.result()
        except RuntimeError as error:
            if not peer_gone(error):
                raise
            mark_failed()
            report_stopped(self.env.rank, error)


#: A call's site: every frame of the script's (file, line), and its count of
#: calls since the last ``accel.backward``.
Site = tuple[tuple[tuple[str, int], ...], int]


class LossSiteError(RuntimeError):
    """A rank's ``accel.global_loss(None)`` cannot be matched with the others'
    reduction of the loss given to ``accel.backward``."""


def _script_frames() -> tuple[tuple[str, int], ...]:
    """The file and line of every frame of the script's (those outside the
    runtime) under its call into the runtime, the same on every rank at one
    call: a helper called from two lines is two sites."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        if not frame.f_globals.get("__name__", "").startswith(_PACKAGE):
            frames.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back  # type: ignore[assignment]
    return tuple(frames)


_PACKAGE = __name__.rpartition(".")[0] + "."


def _mark_finished(rank: int) -> None:
    """Tell the launcher that this rank's work is done: an abort after this point
    (torch's gloo teardown race) does not lose anything."""
    folder = os.environ.get(DONE_DIR_VARIABLE)
    if not folder or process_failed():
        return
    try:
        with open(os.path.join(folder, f"rank{rank}"), "w"):
            pass
    except OSError:
        pass


_RUNTIME: Runtime | None = None


def get_runtime(accelerator: bool = True) -> Runtime:
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = Runtime(load_config(), DistEnv.from_environ(), accelerator)
        atexit.register(_shutdown)
    elif not accelerator and _RUNTIME.device.type != "cpu":
        raise ConfigError(
            f"accel.device(accelerator=False) was called after the runtime chose "
            f"{_RUNTIME.device}; ask for the CPU before any other runtime call"
        )
    return _RUNTIME


def peek_runtime() -> Runtime | None:
    return _RUNTIME


def current_env() -> DistEnv:
    """The runtime's process facts, or the environment's before it starts (a
    call that must not start it: it is a rendezvous)."""
    runtime = peek_runtime()
    return runtime.env if runtime is not None else DistEnv.from_environ()


def _shutdown() -> None:
    global _RUNTIME
    if _RUNTIME is not None:
        _RUNTIME.close()
        _RUNTIME = None


def reset_runtime(runtime: Runtime | None = None) -> Any:
    """Replace the process-wide runtime (tests); returns the previous one."""
    global _RUNTIME
    previous, _RUNTIME = _RUNTIME, runtime
    return previous
