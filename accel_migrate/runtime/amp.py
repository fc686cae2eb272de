"""What migrated AMP code calls: the precision is the runtime's, not the script's.

A single-GPU script with AMP wraps its forward in ``torch.autocast`` and scales its
loss with a ``GradScaler``. After migration the precision plugin does both
(chosen with ``--precision``), so:

- ``accel.autocast(...)`` replaces ``torch.autocast(...)``: the plugin's autocast
  for code outside the model (the loss); the model's own forward is already
  covered. With fp32, or under FSDP (whose outputs come back in fp32), it does
  nothing.
- ``accel.grad_scaler(...)`` replaces ``GradScaler(...)``: an object with the
  GradScaler methods the script calls, which defer to the plugin:
  ``scale(loss)`` returns the loss (``accel.backward`` scales it, once),
  ``step(optimizer)`` steps (skipped on inf/NaN by the plugin), ``update()`` does
  nothing, ``unscale_(optimizer)`` unscales, ``state_dict()`` is the plugin's.

The script's ``enabled=`` flag still means something: a script that turns AMP
off (``enabled=False``) in a run configured for fp16/bf16 stops with an error
that says so; a script that turns it on in an fp32 run gets a one-time warning
naming ``--precision``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from ._state import Runtime, get_runtime
from .config import ConfigError

_warned = False


def check_script_amp(runtime: Runtime, enabled: bool, what: str) -> None:
    global _warned
    precision = runtime.config.precision
    if not enabled and precision != "fp32":
        raise ConfigError(
            f"the script turns AMP off here ({what}, enabled=False), but this run uses "
            f"precision {precision!r} (from {runtime.config.source_of('precision')}); "
            f"launch with --precision fp32 or let the script enable AMP"
        )
    if enabled and precision == "fp32" and not _warned:
        _warned = True
        warnings.warn(
            f"the script enables AMP ({what}), but this run is fp32; launch with "
            f"--precision fp16 (or bf16) to train in mixed precision",
            stacklevel=3,
        )


@contextmanager
def autocast(*args: Any, enabled: bool = True, **kwargs: Any) -> Iterator[None]:
    """``torch.autocast`` for the runtime's precision; the arguments the script
    gave (device type, dtype) are superseded by the configuration."""
    runtime = get_runtime()
    check_script_amp(runtime, enabled, "autocast")
    context = runtime.precision.forward_context() if enabled else nullcontext()
    with context:
        yield


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
        return None

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
    return GradScaler(runtime, enabled)
