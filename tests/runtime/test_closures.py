"""``optimizer.step(closure)`` of a prepared optimizer under a sharded loader:
the closure's loss comes back as ``accel.global_loss(loss)``, so that L-BFGS
takes its decisions (line search, ``tolerance_change``) on the same value on
every rank. The world-2 run is ``fixtures/soundness/lbfgs_closure_r22.py``."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from accel_migrate.runtime import api
from accel_migrate.runtime.closures import ClosureLossError, global_closures


@pytest.fixture
def doubled(monkeypatch: pytest.MonkeyPatch) -> list[torch.Tensor]:
    """``accel.global_loss`` as a visible stand-in: twice the rank's loss."""
    seen: list[torch.Tensor] = []

    def global_loss(loss: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        seen.append(loss)
        return loss.detach() * 2

    monkeypatch.setattr(api, "global_loss", global_loss)
    return seen


def _fit(optimizer_class, **kwargs):
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    x, y = torch.randn(8, 3), torch.randn(8, 1)
    optimizer = optimizer_class(model.parameters(), **kwargs)
    global_closures(optimizer)

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    return optimizer, closure


def test_lbfgs_decides_on_the_global_loss(doubled) -> None:
    optimizer, closure = _fit(torch.optim.LBFGS, max_iter=3)
    returned = optimizer.step(closure)
    assert len(doubled) == 3  # every evaluation, not only the first
    assert torch.equal(returned, doubled[0].detach() * 2)


@pytest.mark.parametrize("by_keyword", [False, True])
def test_any_optimizer_returns_the_global_loss(doubled, by_keyword) -> None:
    optimizer, closure = _fit(torch.optim.SGD, lr=0.1)
    returned = (
        optimizer.step(closure=closure) if by_keyword else optimizer.step(closure)
    )
    assert len(doubled) == 1 and torch.equal(returned, doubled[0].detach() * 2)


def test_a_step_without_closure_is_unchanged(doubled) -> None:
    optimizer, closure = _fit(torch.optim.SGD, lr=0.1)
    closure()
    assert optimizer.step() is None and not doubled


def test_a_closure_returning_a_number_is_refused(doubled) -> None:
    optimizer, closure = _fit(torch.optim.LBFGS, max_iter=2)
    with pytest.raises(ClosureLossError, match="return the loss tensor"):
        optimizer.step(lambda: closure().item())


def test_a_closure_returning_nothing_returns_nothing(doubled) -> None:
    optimizer, closure = _fit(torch.optim.SGD, lr=0.1)
    assert optimizer.step(lambda: closure() and None) is None and not doubled
