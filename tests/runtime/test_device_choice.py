"""The device a process runs on, on a machine with GPUs (faked: this one has
none). A migrated script that names no device calls
``accel.device(accelerator=False)`` first (the codemod's ``device_free``): its
runtime keeps every process, and every model it prepares, on the CPU, where the
script's batches are; a script that asks for the device gets its local GPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import Runtime, pick_device, reset_runtime
from accel_migrate.runtime.config import ConfigError
from accel_migrate.runtime.env import DistEnv


@pytest.fixture
def gpus(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Two fake GPUs: the devices ``set_device`` was asked for are recorded."""
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    return chosen


def test_a_script_that_asks_for_the_device_gets_its_local_gpu(gpus: list[int]) -> None:
    env = DistEnv(rank=1, world_size=2, local_rank=1, local_world_size=2)
    assert pick_device(env, accelerator=True) == torch.device("cuda", 1)
    assert gpus == [1]


def test_a_device_free_script_keeps_every_process_on_the_cpu(gpus: list[int]) -> None:
    env = DistEnv(rank=1, world_size=2, local_rank=1, local_world_size=2)
    assert pick_device(env, accelerator=False) == torch.device("cpu")
    assert gpus == [], "no GPU is touched"
    previous = reset_runtime(None)
    try:
        assert accel.device(accelerator=False) == torch.device("cpu")
        assert gpus == []
        prepared = accel.prepare_model(nn.Linear(2, 2))
        assert all(p.device.type == "cpu" for p in prepared.parameters())
        runtime = reset_runtime(None)
        assert isinstance(runtime, Runtime) and runtime.device.type == "cpu"
        # the CPU asked for after the runtime chose a GPU is refused, loudly
        runtime.device = torch.device("cuda", 0)
        reset_runtime(runtime)
        with pytest.raises(ConfigError, match="before any other runtime call"):
            accel.device(accelerator=False)
    finally:
        reset_runtime(previous)
