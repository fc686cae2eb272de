"""The precision plugin interface. The base class is fp32: every hook is a no-op."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import torch

from ..comm import Collectives
from ..config import PrecisionName

_REGISTRY: dict[str, type[Precision]] = {}


class PrecisionUnavailableError(RuntimeError):
    """The device cannot run the precision that was asked for."""


class Precision:
    """fp32: the model runs as the user wrote it."""

    name: ClassVar[PrecisionName] = "fp32"
    #: Which strategies this class serves; "*" is the default for any strategy.
    strategies: ClassVar[tuple[str, ...]] = ("*",)
    #: Whether optimizer steps must go through ``optimizer_step``.
    hooks_optimizer_step: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for strategy in cls.strategies:
            _REGISTRY[f"{strategy}/{cls.name}"] = cls

    def __init__(self, device: torch.device, comm: Collectives | None = None) -> None:
        self.device = device
        self.comm = comm

    @contextmanager
    def forward_context(self) -> Iterator[None]:
        """Entered around every forward of a prepared model."""
        yield

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss

    def optimizer_step(
        self,
        optimizer: torch.optim.Optimizer,
        step: Callable[..., Any],
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        return step(*args, **kwargs)

    def unscale_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        return None

    def fsdp_policy(self) -> Any | None:
        """A ``MixedPrecisionPolicy`` for FSDP, or None for full precision."""
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


_REGISTRY["*/fp32"] = Precision


def precision_class(strategy: str, precision: str) -> type[Precision]:
    """Look the plugin up in the (strategy, precision) table."""
    try:
        return _REGISTRY.get(f"{strategy}/{precision}") or _REGISTRY[f"*/{precision}"]
    except KeyError:
        known = sorted({key.split("/")[1] for key in _REGISTRY})
        raise ValueError(
            f"precision {precision!r} is not one of: {', '.join(known)}"
        ) from None
