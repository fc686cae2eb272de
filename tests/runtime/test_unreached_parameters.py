"""DDP's "Expected to have finished reduction" at the next forward (a backward
that reached only some parameters: StyleGAN2's lazy R1 penalty, a loss made of
``torch.autograd.grad`` of the output alone) is raised as the runtime's own
error, naming the cause and the fix; any other error passes through as it is."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from accel_migrate.runtime._state import Runtime
from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.module import PreparedModule, UnreachedParametersError


class Raising(nn.Module):
    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(self.message)


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch):
    def prepare(message: str) -> nn.Module:
        prepared = PreparedModule(
            nn.Linear(2, 2), Runtime(RuntimeConfig(), DistEnv())  # not installed
        )
        monkeypatch.setattr(
            PreparedModule, "ensure_ready", lambda self: Raising(message)
        )
        return prepared

    return prepare


def test_an_unfinished_reduction_names_the_cause(model) -> None:
    prepared = model(
        "Expected to have finished reduction in the prior iteration before "
        "starting a new one. This error indicates that your module has parameters "
        "that were not used in producing loss."
    )
    with pytest.raises(UnreachedParametersError, match=r"0 \* out\.sum\(\)") as caught:
        prepared(torch.ones(1, 2))
    assert "StyleGAN2" in str(caught.value)
    assert caught.value.__suppress_context__  # printed first, alone


def test_another_error_passes_through(model) -> None:
    prepared = model("mat1 and mat2 shapes cannot be multiplied")
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied") as caught:
        prepared(torch.ones(1, 2))
    assert not isinstance(caught.value, UnreachedParametersError)


def test_a_gradient_handed_twice_names_reentrant_checkpointing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DDP's "Expected to mark a variable ready only once" in the backward pass
    (reentrant activation checkpointing of a weight-shared block) is the
    runtime's RepeatedGradientError; the ALBERT-shaped world-2 run is
    ``fixtures/soundness/checkpoint_shared_layer_r22.py``."""
    from accel_migrate.runtime.strategies import base, ddp

    def raising(self, *args) -> None:
        raise RuntimeError(
            "Expected to mark a variable ready only once. This error is caused by "
            "one of the following reasons: ..."
        )

    monkeypatch.setattr(base.Strategy, "backward", raising)
    strategy = ddp.DDPStrategy.__new__(ddp.DDPStrategy)
    with pytest.raises(
        ddp.RepeatedGradientError, match="use_reentrant=False"
    ) as caught:
        strategy.backward(torch.ones(()), None, None, False, None)
    assert caught.value.__suppress_context__


def test_another_backward_error_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    from accel_migrate.runtime.strategies import base, ddp

    def raising(self, *args) -> None:
        raise RuntimeError("element 0 of tensors does not require grad")

    monkeypatch.setattr(base.Strategy, "backward", raising)
    strategy = ddp.DDPStrategy.__new__(ddp.DDPStrategy)
    with pytest.raises(RuntimeError, match="does not require grad") as caught:
        strategy.backward(torch.ones(()), None, None, False, None)
    assert not isinstance(caught.value, ddp.RepeatedGradientError)
