"""``strategies/ddp_collectives``: what the DDP strategy exchanges itself, in a
process group of one (gloo): one all-reduce per dtype for an averaged backward,
no gradient made for a parameter that has none, a sparse one refused; the
exported errors a script catches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import LossSiteError
from accel_migrate.runtime.module import LateRegistrationError
from accel_migrate.runtime.strategies import ddp_collectives


@pytest.fixture
def group(tmp_path: Path) -> Iterator[None]:
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    all_reduce = dist.all_reduce

    def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        calls.append(tensor.dtype)
        return all_reduce(tensor, *args, **kwargs)

    monkeypatch.setattr(ddp_collectives.dist, "all_reduce", counted)
    return calls


def test_one_all_reduce_per_dtype(group: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # before r33b: one more, of which parameters had a gradient
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    model[0].weight.grad = torch.full_like(model[0].weight, 2.0)
    model[1].bias.grad = torch.ones_like(model[1].bias)
    calls = _counted(monkeypatch)
    ddp_collectives.average_gradients(model, torch.device("cpu"))
    assert calls == [torch.float32]
    assert torch.equal(model[0].weight.grad, torch.full_like(model[0].weight, 2.0))
    assert torch.equal(model[1].bias.grad, torch.ones_like(model[1].bias))
    # a parameter with no gradient on any rank keeps none, as in the original
    assert model[0].bias.grad is None and model[1].weight.grad is None

    mixed = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1).double())
    mixed[1].bias.grad = torch.ones_like(mixed[1].bias)
    calls.clear()
    ddp_collectives.average_gradients(mixed, torch.device("cpu"))
    assert calls == [torch.float32, torch.float64]
    assert torch.equal(mixed[1].bias.grad, torch.ones_like(mixed[1].bias))
    assert mixed[0].weight.grad is None


def test_a_sparse_gradient_is_refused(group: None) -> None:
    embedding = nn.Embedding(4, 2, sparse=True)
    embedding(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        ddp_collectives.average_gradients(embedding, torch.device("cpu"))


def test_the_errors_a_script_catches_are_exported() -> None:
    # before r33b neither was exported from accel_migrate.runtime
    assert accel.LossSiteError is LossSiteError
    assert accel.LateRegistrationError is LateRegistrationError
    assert {"LossSiteError", "LateRegistrationError"} <= set(accel.__all__)
