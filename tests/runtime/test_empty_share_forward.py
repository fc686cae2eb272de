"""A forward that fails on a process's empty share of a short global batch (a
last batch with fewer samples than processes: ``x.view(x.size(0), 1, -1)`` of
zero rows) is raised as the runtime's own error, naming the cause and the fix;
the same error on a batch with rows, or in a single process, passes through."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from accel_migrate.runtime._state import Runtime
from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.module import EmptyShareForwardError, PreparedModule


class Reshaping(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.size(0), 1, -1)


def _prepared(monkeypatch: pytest.MonkeyPatch, world_size: int) -> nn.Module:
    runtime = Runtime(RuntimeConfig(), DistEnv())  # not installed: no group
    runtime.env = DistEnv(rank=1, world_size=world_size)  # only read for the error
    prepared = PreparedModule(nn.Linear(2, 2), runtime)
    monkeypatch.setattr(PreparedModule, "ensure_ready", lambda self: Reshaping())
    return prepared


def test_a_forward_failing_on_an_empty_share_names_the_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prepared = _prepared(monkeypatch, world_size=2)
    with pytest.raises(EmptyShareForwardError, match="drop_last=True") as caught:
        prepared(torch.ones(0, 16))
    assert "cannot reshape tensor of 0 elements" in str(caught.value)
    assert caught.value.__suppress_context__  # printed first, alone


def test_the_same_failure_with_rows_passes_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prepared = _prepared(monkeypatch, world_size=2)
    monkeypatch.setattr(
        Reshaping, "forward", lambda self, x: x.view(3, -1, 5)  # a plain bug
    )
    with pytest.raises(RuntimeError) as caught:
        prepared(torch.ones(2, 4))
    assert not isinstance(caught.value, EmptyShareForwardError)


def test_a_single_process_error_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    prepared = _prepared(monkeypatch, world_size=1)
    with pytest.raises(RuntimeError) as caught:
        prepared(torch.ones(0, 16))
    assert not isinstance(caught.value, EmptyShareForwardError)
