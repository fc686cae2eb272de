"""The first-step guard on a plain tensor trained outside any module (AM031's
runtime side), in one process with test_guards' stand-in runtime."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from accel_migrate.runtime import guards
from tests.runtime.test_guards import GuardRuntime


def test_a_plain_tensor_a_prepared_optimizer_steps_is_refused_as_a_tensor() -> None:
    runtime = GuardRuntime()
    model = runtime.prepare(nn.Linear(3, 1))
    log_temperature = torch.zeros(1, requires_grad=True)  # no module owns it
    optimizer = torch.optim.Adam([*model.parameters(), log_temperature], lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    (model(torch.randn(2, 3)) / log_temperature.exp()).mean().backward()
    with pytest.raises(guards.UnpreparedParametersError) as error:
        optimizer.step()
    message = str(error.value)
    assert (
        "belong to no prepared model: 1 plain tensor(s) with requires_grad of no "
        "module, shape (1,)." in message
    )
    assert "nn.Parameter(s)" not in message  # it is not one
    assert "make each an nn.Parameter of a module the script prepares" in message
    assert torch.equal(log_temperature.detach(), torch.zeros(1))  # not stepped


def test_parameters_and_plain_tensors_are_named_apart() -> None:
    runtime = GuardRuntime()
    scale = nn.Parameter(torch.ones(2))
    bias = torch.zeros(3, requires_grad=True)
    optimizer = torch.optim.SGD([scale, bias], lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    (scale.sum() + bias.sum()).backward()
    with pytest.raises(
        guards.UnpreparedParametersError,
        match=r"1 nn.Parameter\(s\) of no module, shape \(2,\); 1 plain tensor\(s\) "
        r"with requires_grad of no module, shape \(3,\)",
    ):
        optimizer.step()
