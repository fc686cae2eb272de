"""DeepSpeed ZeRO (``--strategy deepspeed --zero-stage 1|2|3``), an optional extra.

``pip install "accel-migrate[deepspeed]"``. DeepSpeed is imported when a model is
prepared under this strategy, never at ``import accel_migrate.runtime``.

- The engine is built at the model's first forward (as DDP's wrapper is), from
  the model and the one optimizer that holds its parameters: the script's own
  torch optimizer, which DeepSpeed then steps on its partitions. Its LR
  scheduler keeps working: it edits the same ``param_groups``.
- The DeepSpeed config is generated from the runtime's numbers (see
  ``deepspeed_config``): micro batch = this rank's share of the global batch,
  accumulation 1 in DeepSpeed's count with ``managed_gradient_accumulation``
  off, so the script's own loop decides where a step is (every
  ``optimizer.step()`` is the boundary, however many ``accel.backward`` calls
  came before), and ``train_batch_size`` is micro x 1 x world by construction.
  The ZeRO buffer sizes are bounded by the model (``zero_buckets``): DeepSpeed's
  defaults allocate a 1.9 GiB gradient bucket per rank whatever the model.
- ``accel.backward`` runs ``engine.backward``; ``optimizer.step()`` and
  ``zero_grad()`` run the engine's. ``accel.clip_grad_norm_`` hands the clip to
  DeepSpeed's step (on the global gradient, as torch's) and returns the global
  norm, measured with one extra gradient all-reduce.
- State dicts are full with the original keys: the fp32 master weights, and the
  optimizer in PyTorch's layout (integer ids), assembled from the partitions
  (collectives: every rank calls them; see ``_deepspeed_state.py``).
- bf16 is autocast around the forward, as under DDP (DeepSpeed's own bf16 mode
  would turn the script's model into bf16 and leave its inputs fp32); fp16 is
  DeepSpeed's fp16 mode on a GPU and refused on the CPU (see
  ``precision/deepspeed_fp16.py``).

Not supported (one-line errors): two trained models (a GAN's two engines),
optimizer closures, ``accel.save(model)`` of a stage-3 model.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import types
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..comm import broadcast_from_rank0
from ..config import ConfigError, RuntimeConfig
from ..env import DistEnv
from ._deepspeed_state import DeepSpeedState
from .base import LateParameterError, Strategy, optimizers_holding

INSTALL_HINT = 'pip install "accel-migrate[deepspeed]"'


#: DeepSpeed 0.19's defaults, in elements: ``reduce_bucket_size`` and
#: ``allgather_bucket_size`` 5e8, ``stage3_prefetch_bucket_size`` 5e7,
#: ``stage3_max_live_parameters`` / ``stage3_max_reuse_distance`` 1e9.
DS_BUCKET, DS_PREFETCH, DS_LIVE = 500_000_000, 50_000_000, 1_000_000_000
#: A bucket holds at most this fraction of the model (and at least its largest
#: parameter). DeepSpeed allocates its gradient bucket whole (``torch.empty(
#: reduce_bucket_size)``), so the default costs 1.9 GiB of fp32 per rank for any
#: model; 1/16 of the model keeps the bucket under 1/16 of one copy of it, while
#: the number of collectives per backward stays about 16 (latency, not bandwidth).
BUCKET_FRACTION = 16


def bucket_elements(parameter_sizes: Iterable[int]) -> int:
    """Elements per bucket for a model with these trainable parameter sizes."""
    sizes = [int(n) for n in parameter_sizes]
    bound = max(max(sizes, default=1), math.ceil(sum(sizes) / BUCKET_FRACTION))
    bound += bound % 2  # stage 1/2 assert allgather_bucket_size is even (alignment)
    return min(DS_BUCKET, bound)


def zero_buckets(zero_stage: int, parameter_sizes: Iterable[int]) -> dict[str, int]:
    """The ``zero_optimization`` sizes, bounded by the model instead of 5e8.

    ``reduce_bucket_size`` is the gradient buffer each rank allocates (stage 3
    keeps it between steps); ``allgather_bucket_size`` the chunk of the
    parameter all-gather after a stage 1/2 step. Stage 3 also gathers
    parameters ahead of use (``prefetch``), keeps gathered ones alive up to
    ``max_live_parameters`` and does not release one that is used again within
    ``max_reuse_distance`` elements: by default 1e9, so a model under a billion
    parameters stays gathered from forward to backward. Parameters of at most
    ``stage3_param_persistence_threshold`` elements (1e5, kept) are never
    partitioned; ``stage3_model_persistence_threshold`` bounds their total.
    Stage 3's optimizer steps ``sub_group_size`` elements of the partition at a
    time (default 1e9: all of it at once).
    """
    bucket = bucket_elements(parameter_sizes)
    sizes: dict[str, int] = {
        "reduce_bucket_size": bucket,
        "allgather_bucket_size": bucket,
    }
    if zero_stage == 3:
        sizes.update(
            stage3_prefetch_bucket_size=min(DS_PREFETCH, bucket),
            # The module being run (up to one bucket) plus one prefetched bucket.
            stage3_max_live_parameters=min(DS_LIVE, 2 * bucket),
            stage3_max_reuse_distance=min(DS_LIVE, bucket),
            stage3_model_persistence_threshold=bucket,
            # The optimizer steps each sub-group of this rank's partition on its
            # own; one flat partition makes a torch optimizer's temporaries (Adam's
            # sqrt and division) 1/W of the model each, measured at the step.
            sub_group_size=min(DS_LIVE, bucket),
        )
    return sizes


def deepspeed_config(
    *,
    micro_batch: int,
    world_size: int,
    zero_stage: int,
    precision: str,
    parameter_sizes: Iterable[int],
    cpu_offload: bool = False,
    pin_memory: bool = False,
) -> dict[str, Any]:
    """The engine's config, from the runtime's own numbers and the model's sizes.

    ``cpu_offload`` (``fsdp-cpu-offload``): ZeRO-Offload, the optimizer state in
    host memory (every stage) and under stage 3 the parameters too; the
    script's torch optimizer then steps there (``zero_force_ds_cpu_optimizer``
    off: DeepSpeed would otherwise insist on its own CPU Adam, a kernel build).
    """
    accumulation = 1  # DeepSpeed's count; the script's loop owns accumulation
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch,
        "gradient_accumulation_steps": accumulation,
        "train_batch_size": micro_batch * accumulation * world_size,
        "managed_gradient_accumulation": False,
        "zero_optimization": {
            "stage": zero_stage,
            **zero_buckets(zero_stage, parameter_sizes),
        },
        # Any torch optimizer the script built (SGD, Adadelta...) is stepped on
        # the partitions; DeepSpeed's own fused optimizers would need kernels.
        "zero_allow_untested_optimizer": True,
        # Set by accel.clip_grad_norm_ (see DeepSpeedStrategy.clip_grad_norm_).
        "gradient_clipping": 0.0,
        "steps_per_print": 2**31 - 1,
        "wall_clock_breakdown": False,
    }
    if cpu_offload:
        host = {"device": "cpu", "pin_memory": pin_memory}
        zero = config["zero_optimization"]
        zero["offload_optimizer"] = dict(host)
        if zero_stage == 3:
            zero["offload_param"] = dict(host)
    # Only read with offload, which a user's deepspeed-config may also ask for.
    config["zero_force_ds_cpu_optimizer"] = False
    if precision == "fp16":
        config["fp16"] = {"enabled": True, "auto_cast": True}
    return config


def check_launch(config: RuntimeConfig) -> None:
    """What ``accel-migrate launch`` refuses before it starts any process."""
    DeepSpeedStrategy.check(DistEnv(launched=True), config)
    if config.deepspeed_config:
        from .deepspeed_user import check_user_config, read_user_config

        source = config.source_of("deepspeed_config")
        check_user_config(
            read_user_config(config.deepspeed_config, source),
            precision=config.precision,
            zero_stage=config.zero_stage,
            source=source,
        )
    if config.precision == "fp16" and not torch.cuda.is_available():
        from ..precision.deepspeed_fp16 import fp16_refusal

        raise ConfigError(fp16_refusal("cpu"))


class DeepSpeedStrategy(DeepSpeedState, Strategy):
    name = "deepspeed"
    #: fsdp-cpu-offload is ZeRO-Offload here.
    settings = frozenset({"zero_stage", "deepspeed_config", "fsdp_cpu_offload"})
    wraps_optimizer = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.engine: Any = None
        self._module: nn.Module | None = None
        self._optimizer: torch.optim.Optimizer | None = None
        #: The optimizer's parameters per group as the script built it.
        self._groups: list[list[nn.Parameter]] = []
        self._inside_engine = False
        #: clip_grad_norm_ ran the stage-2 boundary copy for the coming step.
        self._finalized = False
        #: The parameters that required a gradient when the engine was built.
        self._built: frozenset[int] = frozenset()
        #: Models frozen at their first forward (no engine).
        self._frozen: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        # Stage 3 splits the parameters themselves: a pickled module would be empty.
        self.shards_parameters = self.stage == 3  # type: ignore[misc]

    @classmethod
    def check(cls, env: DistEnv, config: RuntimeConfig) -> None:
        asked = f"strategy 'deepspeed' (from {config.source_of('strategy')})"
        if importlib.util.find_spec("deepspeed") is None:
            raise ConfigError(f"{asked} needs DeepSpeed: {INSTALL_HINT}")
        if not env.launched:
            raise ConfigError(
                f"{asked} needs the launcher: accel-migrate launch --strategy deepspeed"
            )

    @property
    def stage(self) -> int:
        return self.config.zero_stage

    # -- models -----------------------------------------------------------------------
    def setup_module(self, module: nn.Module) -> nn.Module:
        if not any(p.requires_grad for p in module.parameters()):
            _broadcast(
                module, self.device
            )  # a frozen model (a teacher): no engine needed
            self._frozen.add(module)
            return module
        if self.engine is not None:
            raise RuntimeError(
                "accel-migrate: --strategy deepspeed trains one prepared model; this "
                "script trains a second one (two engines, e.g. a GAN's): use "
                "--strategy ddp or fsdp"
            )
        optimizer = self._optimizer_of(module)
        import deepspeed

        logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
        _no_kernel_builds()
        self._groups = [list(group["params"]) for group in optimizer.param_groups]
        self._built = frozenset(id(p) for p in module.parameters() if p.requires_grad)
        config = deepspeed_config(
            micro_batch=self._micro_batch(),
            world_size=self.env.world_size,
            zero_stage=self.stage,
            precision=self.precision.name,
            parameter_sizes=[p.numel() for p in module.parameters() if p.requires_grad],
            cpu_offload=self.config.fsdp_cpu_offload,
            pin_memory=self.device.type == "cuda",
        )
        if self.config.deepspeed_config:
            from .deepspeed_user import merge_user_config, read_user_config

            source = self.config.source_of("deepspeed_config")
            config = merge_user_config(
                config,
                read_user_config(self.config.deepspeed_config, source),
                precision=self.precision.name,
                zero_stage=self.stage,
                source=source,
            )
        engine, *_ = deepspeed.initialize(
            model=module, optimizer=optimizer, config=config, dist_init_required=False
        )
        self.engine, self._module, self._optimizer = engine, module, optimizer
        self._route_optimizer(optimizer)
        return engine

    def after_backward(self, forward_module: nn.Module) -> nn.Module | None:
        """ZeRO's optimizer holds the parameters that required a gradient when
        the engine was built (the model's first forward): one unfrozen later
        (gradual unfreezing) or added later would never be stepped."""
        if forward_module is self.engine:
            module = self._module
            built = self._built
        elif forward_module in self._frozen:
            module, built = forward_module, frozenset()
        else:
            return None
        late = [
            name
            for name, p in module.named_parameters()  # type: ignore[union-attr]
            if p.requires_grad and id(p) not in built
        ]
        if late:
            raise LateParameterError(
                f"accel-migrate: parameter {late[0]!r} of a prepared model requires a "
                "gradient now but did not (or did not exist) at the model's first "
                "forward, where --strategy deepspeed built its engine, whose ZeRO "
                "optimizer holds only the parameters trainable then: it would never "
                "be stepped. Unfreeze it before the model's first forward, or use "
                "--strategy ddp or fsdp, which handle gradual unfreezing"
            )
        return None

    def _optimizer_of(self, module: nn.Module) -> torch.optim.Optimizer:
        params = {p for p in module.parameters() if p.requires_grad}
        holding = optimizers_holding(params)
        if len(holding) != 1:
            raise RuntimeError(
                "accel-migrate: --strategy deepspeed builds its engine from the model "
                f"and the one optimizer over its parameters at the model's first "
                f"forward; {len(holding)} optimizers hold them then: build exactly one "
                "before the first forward"
            )
        optimizer = holding[0]
        own = {p for group in optimizer.param_groups for p in group["params"]}
        if not own <= set(module.parameters()):
            raise RuntimeError(
                "accel-migrate: under --strategy deepspeed the optimizer may only hold "
                "parameters of the model it trains; this one also holds others"
            )
        return optimizer

    def _micro_batch(self) -> int:
        share = self.runtime_share()
        if share is None:
            return 1
        local, total = share
        if self.config.batch_mode == "per-device":
            return max(local, 1)
        return max(math.ceil(total / self.env.world_size), 1)

    def runtime_share(self) -> tuple[int, int] | None:
        from .._state import peek_runtime

        runtime = peek_runtime()
        return None if runtime is None else runtime._batch_share

    def _route_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """``optimizer.step()``/``zero_grad()`` run the engine's. DeepSpeed steps
        the same torch optimizer on its partitions: those calls, made while the
        engine runs, reach the optimizer's own methods."""
        strategy, engine = self, self.engine
        own_step, own_zero_grad = optimizer.step, optimizer.zero_grad

        def step(opt: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
            if strategy._inside_engine:
                return own_step(*args, **kwargs)
            if args or kwargs:
                raise RuntimeError(
                    "accel-migrate: optimizer.step(closure) is not supported under "
                    "--strategy deepspeed (DeepSpeed steps without a closure)"
                )
            with strategy._engine_call():
                if strategy._finalized:
                    # clip_grad_norm_ did the boundary's copy already; twice fails.
                    zero = engine.optimizer
                    zero.finalize_gradient_accumulation_boundary = lambda: (
                        zero.set_gradient_accumulation_boundary(True)
                    )
                try:
                    engine.step()
                finally:
                    if strategy._finalized:
                        del engine.optimizer.finalize_gradient_accumulation_boundary
                        strategy._finalized = False
            return None

        def zero_grad(opt: torch.optim.Optimizer, set_to_none: bool = True) -> None:
            if strategy._inside_engine:
                own_zero_grad(set_to_none)
                return
            with strategy._engine_call():
                engine.optimizer.zero_grad(set_to_none=set_to_none)

        # An LR scheduler built before wrapped the step to see it called; the
        # engine calls that wrapper (own_step), so keep the scheduler's mark.
        if hasattr(own_step, "_wrapped_by_lr_sched"):
            step._wrapped_by_lr_sched = True  # type: ignore[attr-defined]
        optimizer.step = types.MethodType(step, optimizer)  # type: ignore[method-assign]
        optimizer.zero_grad = types.MethodType(zero_grad, optimizer)  # type: ignore[method-assign]
        optimizer.state_dict = types.MethodType(  # type: ignore[method-assign]
            lambda opt: strategy.optimizer_state_dict(), optimizer
        )
        optimizer.load_state_dict = types.MethodType(  # type: ignore[method-assign]
            lambda opt, state: strategy.load_optimizer_state_dict(state), optimizer
        )

    @contextmanager
    def _engine_call(self) -> Iterator[None]:
        self._inside_engine = True
        try:
            yield
        finally:
            self._inside_engine = False

    def backward(
        self,
        tensors: torch.Tensor | list[torch.Tensor],
        gradient: Any,
        retain_graph: bool | None,
        create_graph: bool,
        inputs: Any,
    ) -> None:
        if self.engine is None:
            super().backward(tensors, gradient, retain_graph, create_graph, inputs)
            return
        if (
            not isinstance(tensors, torch.Tensor)
            or gradient is not None
            or create_graph
            or inputs is not None
            or tensors.numel() != 1
        ):
            raise RuntimeError(
                "accel-migrate: under --strategy deepspeed accel.backward takes one "
                "scalar loss (no gradient=, inputs=, create_graph=, or list of losses)"
            )
        with self._engine_call():
            self.engine.backward(
                tensors.reshape(()),
                retain_graph=bool(retain_graph),
                scale_wrt_gas=False,
            )

    # -- gradients ----------------------------------------------------------------------
    def clip_grad_norm_(
        self,
        parameters: Iterable[torch.Tensor],
        max_norm: float,
        norm_type: float = 2.0,
    ) -> torch.Tensor:
        if self.engine is None:
            return super().clip_grad_norm_(parameters, max_norm, norm_type)
        if float(norm_type) != 2.0:
            raise RuntimeError(
                f"accel-migrate: DeepSpeed clips by the 2-norm only; norm_type={norm_type}"
            )
        params = {id(p) for p in parameters}
        model_params = [p for p in self._module.parameters() if p.requires_grad]  # type: ignore[union-attr]
        if not params >= {id(p) for p in model_params}:
            raise RuntimeError(
                "accel-migrate: under --strategy deepspeed, clip_grad_norm_ clips all "
                "of the model's parameters at once (DeepSpeed clips inside its step); "
                "pass model.parameters()"
            )
        # Applied by DeepSpeed's step, to the averaged gradient, as torch would.
        self.engine.optimizer.clip_grad = float(max_norm)
        self.engine._config.gradient_clipping = float(max_norm)
        return self._global_norm(model_params)

    def _global_norm(self, params: list[nn.Parameter]) -> torch.Tensor:
        total = torch.zeros((), dtype=torch.float64, device=self.device)
        if self.stage == 1:
            # Not reduced yet (that is the step's work): reduce a copy here.
            grads = [p.grad for p in params if p.grad is not None]
            if grads:
                flat = torch.cat([g.detach().float().reshape(-1) for g in grads])
                dist.all_reduce(flat)
                flat.div_(self.env.world_size)
                total += flat.double().pow(2).sum()
        else:
            from deepspeed.utils import safe_get_full_grad

            offloaded = bool(getattr(self.engine.optimizer, "offload_optimizer", False))
            if self.stage == 2 or offloaded:
                # Reduced at each backward; the step's first act (a local copy
                # into the partitions' flat gradients) makes them readable. Stage
                # 3 with ZeRO-Offload copies into its host fp32 gradients then
                # too (without, safe_get_full_grad read the last step's, clipped).
                if not self._finalized:
                    self.engine.optimizer.finalize_gradient_accumulation_boundary()
                    self._finalized = True
            for param in params:
                grad = safe_get_full_grad(param)
                if grad is not None:
                    total += grad.detach().double().pow(2).sum()
        return total.sqrt().float()


def _no_kernel_builds() -> None:
    """Use only the DeepSpeed kernels built at install time, never compile one.

    With ``DS_BUILD_OPS=0`` none is built, and on the CPU DeepSpeed's comm backend
    then JIT-compiles a shared-memory all-reduce with ninja when the engine starts
    (minutes on 2 cores, and a file lock that a killed run leaves behind). That
    kernel serves inference only; ZeRO with the script's torch optimizer needs
    none. Deciding it here, before DeepSpeed probes (which runs compilers), keeps
    the engine's start-up at seconds.
    """
    import deepspeed.ops
    from deepspeed.git_version_info import installed_ops

    if "__compatible_ops__" not in vars(deepspeed.ops):
        deepspeed.ops.__compatible_ops__ = dict(installed_ops)  # type: ignore[attr-defined]


def _broadcast(module: nn.Module, device: torch.device) -> None:
    if not dist.is_initialized():
        return
    broadcast_from_rank0([*module.parameters(), *module.buffers()], device)
