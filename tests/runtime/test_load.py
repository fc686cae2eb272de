"""``accel.load``: GPU tensors of a checkpoint come back on the process's own
device, CPU tensors (RNG states) stay on the CPU; a map_location given is kept."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch

import accel_migrate.runtime as accel
from accel_migrate.runtime.saving import _own_device_location


def _saved_as_if_on_gpu(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint whose weights say they were saved on cuda:1 (as a rank-1 or
    second-GPU original writes it), next to a CPU RNG state."""
    tag = torch.serialization.location_tag
    rng = torch.get_rng_state()

    def location(storage: object) -> str:
        return "cpu" if storage is rng.untyped_storage() else "cuda:1"

    monkeypatch.setattr(torch.serialization, "location_tag", location)
    torch.save({"weight": torch.arange(4.0), "rng": rng}, path)
    monkeypatch.setattr(torch.serialization, "location_tag", tag)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU behaviour")
def test_gpu_checkpoint_loads_on_a_cpu_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ckpt.pt"
    _saved_as_if_on_gpu(path, monkeypatch)
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(path)  # what the original's plain torch.load does here
    state = accel.load(path)
    assert state["weight"].device.type == "cpu"
    assert torch.equal(state["weight"], torch.arange(4.0))
    assert state["rng"].device.type == "cpu"
    torch.set_rng_state(state["rng"])  # still a valid CPU RNG state


def test_cpu_storages_are_left_where_torch_puts_them() -> None:
    storage = torch.zeros(2).untyped_storage()
    assert _own_device_location(storage, "cpu") is None


def test_a_map_location_given_is_used(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    buffer.seek(0)
    seen = []

    def mine(storage: object, location: str) -> object:
        seen.append(location)
        return storage

    assert torch.equal(accel.load(buffer, map_location=mine)["w"], torch.ones(2))
    assert seen == ["cpu"]
