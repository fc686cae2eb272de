"""What migrated AMP code calls: the precision is the runtime's, not the script's.

A single-GPU script with AMP wraps its forward in ``torch.autocast`` and scales its
loss with a ``GradScaler``. After migration the precision plugin does both
(chosen with ``--precision``), so:

- ``accel.autocast(...)`` replaces ``torch.autocast(...)``: the plugin's autocast
  for code outside the model (the loss); the model's own forward is already
  covered. With fp32, or under FSDP (whose outputs come back in fp32), it does
  nothing. ``enabled=False`` keeps a region out of autocast, as it did before. It
  is reusable, like torch's autocast objects.
- ``accel.grad_scaler(...)`` replaces ``GradScaler(...)``: an object with the
  GradScaler methods the script calls, which defer to the plugin:
  ``scale(loss)`` returns the loss (``accel.backward`` scales it, once),
  ``step(optimizer)`` steps (skipped on inf/NaN by the plugin), ``update()``
  applies the scale change, ``unscale_(optimizer)`` unscales, ``state_dict()`` is
  the plugin's, in torch's own GradScaler format (checkpoints load both ways).
  ``init_scale``, ``growth_factor``, ``backoff_factor`` and ``growth_interval``
  configure the plugin's loss scaling.

When the script's ``enabled=`` flags disagree with the run's precision (AMP off in
an fp16 run, on in an fp32 run) a warning names ``--precision`` once; the run's
configuration wins.
"""

from __future__ import annotations

import warnings
from contextlib import ExitStack
from types import TracebackType
from typing import Any

import torch

from ._state import Runtime, get_runtime

_warned: set[str] = set()
_SCALING_SETTINGS = ("init_scale", "growth_factor", "backoff_factor", "growth_interval")


def check_script_amp(runtime: Runtime, enabled: bool, what: str) -> None:
    precision = runtime.config.precision
    if not enabled and precision == "fp16" and what not in _warned:
        _warned.add(what)
        warnings.warn(
            f"the script turns AMP off ({what}, enabled=False), but this run is fp16 "
            f"(from {runtime.config.source_of('precision')}); the run's precision wins",
            stacklevel=3,
        )
    if enabled and precision == "fp32" and "fp32" not in _warned:
        _warned.add("fp32")
        warnings.warn(
            f"the script enables AMP ({what}), but this run is fp32; launch with "
            f"--precision fp16 (or bf16) to train in mixed precision",
            stacklevel=3,
        )


class autocast:  # named like the torch.autocast it replaces
    """``torch.autocast`` for the runtime's precision; the device type and dtype the
    script gave are superseded by the configuration."""

    def __init__(self, *args: Any, enabled: bool = True, **kwargs: Any) -> None:
        self._runtime = get_runtime()
        self._enabled = enabled
        self._stacks: list[ExitStack] = []
        check_script_amp(self._runtime, enabled, "autocast")

    def __enter__(self) -> None:
        stack = ExitStack()
        if self._enabled:
            stack.enter_context(self._runtime.precision.forward_context())
        else:
            stack.enter_context(
                torch.autocast(self._runtime.device.type, enabled=False)
            )
        self._stacks.append(stack)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stacks.pop().__exit__(kind, error, tb)

    def __call__(self, function: Any) -> Any:
        """As a decorator: every call runs inside the context."""
        import functools

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return function(*args, **kwargs)

        return wrapper


class GradScaler:
    """The ``torch.amp.GradScaler`` methods a script calls, backed by the plugin."""

    def __init__(self, runtime: Runtime, enabled: bool) -> None:
        self._runtime = runtime
        self._enabled = enabled

    def scale(self, outputs: Any) -> Any:
        return outputs  # accel.backward applies the loss scale

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        self._runtime.precision.unscale_gradients(optimizer)

    def step(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        return optimizer.step(
            *args, **kwargs
        )  # a prepared optimizer's step skips on inf

    def update(self, new_scale: float | None = None) -> None:
        precision = self._runtime.precision
        if hasattr(precision, "apply_pending"):
            precision.apply_pending()
            if new_scale is not None:
                precision.load_state_dict({"scale": float(new_scale)})

    def get_scale(self) -> float:
        return float(getattr(self._runtime.precision, "scale", 1.0))

    def is_enabled(self) -> bool:
        return self._runtime.precision.hooks_optimizer_step

    def state_dict(self) -> dict[str, Any]:
        return self._runtime.precision.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            self._runtime.precision.load_state_dict(state)


def grad_scaler(*args: Any, enabled: bool = True, **kwargs: Any) -> GradScaler:
    runtime = get_runtime()
    check_script_amp(runtime, enabled, "GradScaler")
    settings = {k: kwargs[k] for k in _SCALING_SETTINGS if k in kwargs}
    if args and isinstance(
        args[0], str
    ):  # torch.amp.GradScaler("cuda", init_scale, ...)
        args = args[1:]
    settings.update(dict(zip(_SCALING_SETTINGS, args, strict=False)))
    precision = runtime.precision
    if settings and hasattr(precision, "configure_scaling"):
        precision.configure_scaling(**settings)
    return GradScaler(runtime, enabled)
