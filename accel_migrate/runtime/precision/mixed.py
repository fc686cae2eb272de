"""bf16 and fp16 plugins.

- DDP and one process: autocast around the model's forward; fp16 adds loss scaling.
- FSDP: the sharded module computes in the low precision through a
  ``MixedPrecisionPolicy`` (gradients reduced in fp32, outputs returned in fp32);
  fp16 adds loss scaling whose inf/NaN check is agreed across ranks, because each
  rank only sees its own shard of the gradients.

fp16 runs in fp16 on the CPU too (CPU autocast supports it); a device that cannot
run a precision is refused with a message, never silently swapped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import torch

from ..comm import Collectives
from .base import Precision, PrecisionUnavailableError


def check_autocast(device: torch.device, dtype: torch.dtype, name: str) -> None:
    if (
        device.type == "cuda"
        and dtype == torch.bfloat16
        and not torch.cuda.is_bf16_supported()
    ):
        raise PrecisionUnavailableError(
            f"precision {name!r} needs a GPU with bfloat16 support; {torch.cuda.get_device_name(device)} "
            f"has none. Use --precision fp16 or fp32"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autocast(device.type, dtype=dtype):
                enabled = torch.is_autocast_enabled(device.type)
        except RuntimeError as exc:
            raise PrecisionUnavailableError(
                f"precision {name!r} is not available on {device}: {exc}"
            ) from None
    if not enabled or any("not supported" in str(w.message) for w in caught):
        raise PrecisionUnavailableError(
            f"precision {name!r} is not available on {device.type}: autocast refuses {dtype}"
        )


class LossScaling:
    """Dynamic loss scaling, as torch.amp.GradScaler does it.

    The loss is multiplied by the scale before backward; before an optimizer step
    the gradients are divided by it and checked. A step with an inf or NaN gradient
    is skipped and the scale halves; after ``growth_interval`` clean steps it doubles.
    Scale updates are applied at the next ``scale_loss``, so every optimizer that
    steps in one iteration (a GAN's two) sees the scale its gradients were made with.
    """

    init_scale: ClassVar[float] = 2.0**16
    growth_factor: ClassVar[float] = 2.0
    backoff_factor: ClassVar[float] = 0.5
    growth_interval: ClassVar[int] = 2000
    #: Sharded gradients: ranks must agree on skipping a step.
    agree_across_ranks: ClassVar[bool] = False
    hooks_optimizer_step: ClassVar[bool] = True

    device: torch.device
    comm: Collectives | None

    def _init_scaling(self) -> None:
        self._scale = torch.full(
            (), self.init_scale, dtype=torch.float32, device=self.device
        )
        self._growth_tracker = 0
        self._found_inf: dict[int, torch.Tensor] = {}
        self._pending: list[bool] = []
        self.skipped_steps = 0

    @property
    def scale(self) -> float:
        return float(self._scale)

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        self._apply_pending()
        return loss * self._scale.to(loss.device)

    def unscale_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        if id(optimizer) in self._found_inf:
            return  # already unscaled for this step
        found_inf = torch.zeros(1, dtype=torch.float32, device=self.device)
        inverse = self._scale.double().reciprocal().float()
        grads: dict[tuple[torch.device, torch.dtype], list[torch.Tensor]] = {}
        with torch.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    grad = param.grad
                    if hasattr(grad, "to_local"):  # a DTensor shard (FSDP)
                        grad = grad.to_local()
                    grads.setdefault((grad.device, grad.dtype), []).append(grad)
            for (device, _dtype), tensors in grads.items():
                found = torch.zeros(1, dtype=torch.float32, device=device)
                torch._amp_foreach_non_finite_check_and_unscale_(
                    tensors, found, inverse.to(device)
                )
                found_inf += found.to(self.device)
        if self.agree_across_ranks and self.comm is not None:
            found_inf = self.comm.all_reduce(found_inf, "max")
        self._found_inf[id(optimizer)] = found_inf

    def optimizer_step(
        self,
        optimizer: torch.optim.Optimizer,
        step: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        self.unscale_gradients(optimizer)
        found_inf = bool(self._found_inf.pop(id(optimizer)).item())
        self._pending.append(found_inf)
        if found_inf:
            self.skipped_steps += 1
            return None
        return step(*args, **kwargs)

    def apply_pending(self) -> None:
        """Apply the scale changes of the steps taken since the last backward."""
        self._apply_pending()

    def _apply_pending(self) -> None:
        if not self._pending:
            return
        if any(self._pending):
            self._scale *= self.backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker >= self.growth_interval:
                self._scale *= self.growth_factor
                self._growth_tracker = 0
        self._pending.clear()

    def state_dict(self) -> dict[str, Any]:
        """torch.amp.GradScaler's own format, so checkpoints load into either."""
        self._apply_pending()
        return {
            "scale": self.scale,
            "growth_factor": self.growth_factor,
            "backoff_factor": self.backoff_factor,
            "growth_interval": self.growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._scale.fill_(float(state["scale"]))
        tracker = state.get("_growth_tracker", state.get("growth_tracker"))
        if tracker is not None:
            self._growth_tracker = int(tracker)
        for name in ("growth_factor", "backoff_factor", "growth_interval"):
            if name in state:
                setattr(self, name, type(getattr(type(self), name))(state[name]))


class AutocastPrecision(Precision):
    """Autocast around the model's forward (DDP, one process)."""

    dtype: ClassVar[torch.dtype]
    strategies = ()  # abstract: registers nothing

    def __init__(self, device: torch.device, comm: Collectives | None = None) -> None:
        super().__init__(device, comm)
        check_autocast(device, self.dtype, self.name)

    @contextmanager
    def forward_context(self) -> Iterator[None]:
        with torch.autocast(self.device.type, dtype=self.dtype):
            yield


class BF16Precision(AutocastPrecision):
    name = "bf16"
    dtype = torch.bfloat16
    strategies = ("*",)


class FP16Precision(LossScaling, AutocastPrecision):
    name = "fp16"
    dtype = torch.float16
    strategies = ("*",)

    def __init__(self, device: torch.device, comm: Collectives | None = None) -> None:
        super().__init__(device, comm)
        self._init_scaling()


class ShardedPrecision(Precision):
    """FSDP computes in ``dtype`` through its mixed-precision policy."""

    dtype: ClassVar[torch.dtype]
    strategies = ()

    def __init__(self, device: torch.device, comm: Collectives | None = None) -> None:
        super().__init__(device, comm)
        check_autocast(device, self.dtype, self.name)

    def fsdp_policy(self) -> Any:
        from torch.distributed.fsdp import MixedPrecisionPolicy

        return MixedPrecisionPolicy(
            param_dtype=self.dtype,
            reduce_dtype=torch.float32,
            output_dtype=torch.float32,
        )


class ShardedBF16Precision(ShardedPrecision):
    name = "bf16"
    dtype = torch.bfloat16
    strategies = ("fsdp", "hsdp")


class ShardedFP16Precision(LossScaling, ShardedPrecision):
    name = "fp16"
    dtype = torch.float16
    strategies = ("fsdp", "hsdp")
    agree_across_ranks = True

    def __init__(self, device: torch.device, comm: Collectives | None = None) -> None:
        super().__init__(device, comm)
        self._init_scaling()
