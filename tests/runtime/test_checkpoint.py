"""save_state / load_state in one process: what a folder holds, and that an
interrupted save never replaces a complete one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime import checkpoint
from accel_migrate.runtime._state import reset_runtime


@pytest.fixture(autouse=True)
def fresh_runtime(monkeypatch: pytest.MonkeyPatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    previous = reset_runtime(None)
    yield
    reset_runtime(previous)


def _setup() -> (
    tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.StepLR]
):
    torch.manual_seed(0)
    model = accel.prepare_model(nn.Linear(3, 2))
    optimizer = accel.prepare_optimizer(torch.optim.Adam(model.parameters(), lr=0.1))
    return model, optimizer, torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)


def _train(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    accel.backward(model(torch.randn(4, 3)).pow(2).mean())
    optimizer.step()


def test_nothing_to_resume(tmp_path: Path) -> None:
    _setup()
    assert accel.load_state(tmp_path / "missing") is None


def test_round_trip_restores_everything(tmp_path: Path) -> None:
    model, optimizer, scheduler = _setup()
    _train(model, optimizer)
    scheduler.step()
    accel.save_state(tmp_path / "state", scheduler, epoch=3)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    after_save = torch.rand(1)
    _train(model, optimizer)  # move on, then go back
    scheduler.step()
    resume = accel.load_state(tmp_path / "state", scheduler)
    assert resume is not None and resume.values == {"epoch": 3}
    for name, tensor in saved.items():
        assert torch.equal(model.state_dict()[name], tensor)
    assert scheduler.get_last_lr() == [0.05]
    assert torch.equal(torch.rand(1), after_save), "the RNG continues as after the save"


def test_an_interrupted_save_keeps_the_previous_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, optimizer, _ = _setup()
    accel.save_state(tmp_path / "state")
    before = (tmp_path / "state" / "shared.pt").read_bytes()
    _train(model, optimizer)

    def crash(staging: Path, target: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "_replace", crash)
    with pytest.raises(KeyboardInterrupt):
        accel.save_state(tmp_path / "state")
    assert (tmp_path / "state" / "shared.pt").read_bytes() == before
    assert (tmp_path / "state" / checkpoint.MANIFEST).exists()


def test_a_folder_without_its_manifest_is_not_loaded(tmp_path: Path) -> None:
    kept = _setup()
    accel.save_state(tmp_path / "state")
    (tmp_path / "state" / checkpoint.MANIFEST).unlink()
    assert accel.load_state(tmp_path / "state") is None
    assert kept


def test_a_different_script_is_refused(tmp_path: Path) -> None:
    kept = _setup()
    accel.save_state(tmp_path / "state")
    extra = accel.prepare_model(nn.Linear(2, 2))  # one more model than was saved
    with pytest.raises(RuntimeError, match="holds 1 models"):
        accel.load_state(tmp_path / "state")
    assert extra is not None and kept


def _saved_by(folder: Path, world: int, batch_mode: str | None) -> None:
    """Make ``folder`` look as if ``world`` processes had saved it."""
    manifest_path = folder / checkpoint.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["world_size"] = world
    if batch_mode is None:
        del manifest["batch_mode"]  # as a state of format 1 was
    else:
        manifest["batch_mode"] = batch_mode
    manifest_path.write_text(json.dumps(manifest))
    for rank in range(1, world):
        shutil.copy(folder / "rank0.pt", folder / f"rank{rank}.pt")


@pytest.mark.parametrize("batch_mode", ["per-device", None])
def test_another_world_size_is_refused_unless_batches_were_global(
    tmp_path: Path, batch_mode: str | None
) -> None:
    _setup()
    accel.save_state(tmp_path / "state")
    _saved_by(tmp_path / "state", 2, batch_mode)
    with pytest.raises(RuntimeError, match="saved by 2 processes, this job has 1"):
        accel.load_state(tmp_path / "state")


def test_a_gathered_state_resumes_at_another_world_size(tmp_path: Path) -> None:
    model, optimizer, scheduler = _setup()
    _train(model, optimizer)
    accel.save_state(tmp_path / "state", scheduler, epoch=1)
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    after_save = torch.rand(1)
    _saved_by(tmp_path / "state", 3, "global")
    _train(model, optimizer)
    with pytest.warns(
        UserWarning, match="a state saved by 3 processes: the data order"
    ):
        resume = accel.load_state(tmp_path / "state", scheduler)
    assert resume is not None and resume.values == {"epoch": 1}
    for name, tensor in saved.items():
        assert torch.equal(model.state_dict()[name], tensor)
    assert torch.equal(torch.rand(1), after_save), "rank 0's RNG continues"


def test_a_mid_epoch_state_needs_its_loaders_prepared(tmp_path: Path) -> None:
    _setup()
    accel.save_state(tmp_path / "state")
    own = torch.load(tmp_path / "state" / "rank0.pt", weights_only=False)
    own["loaders"] = [{"epoch": 0, "step": 3, "batches": [[0, 1], [2, 3]]}]
    torch.save(own, tmp_path / "state" / "rank0.pt")
    with pytest.raises(RuntimeError, match="middle of an epoch of 1 prepared loaders"):
        accel.load_state(tmp_path / "state")


def test_a_gathered_state_converts_to_plain_state_dicts(tmp_path: Path) -> None:
    model, optimizer, scheduler = _setup()
    _train(model, optimizer)
    accel.save_state(tmp_path / "state", scheduler)
    out = tmp_path / "plain.pt"
    assert checkpoint.main(["convert", str(tmp_path / "state"), str(out)]) == 0
    plain = torch.load(out, weights_only=False)
    assert plain["models"][0].keys() == model.state_dict().keys()
    fresh = torch.optim.Adam(nn.Linear(3, 2).parameters(), lr=0.1)
    fresh.load_state_dict(plain["optimizers"][0])  # PyTorch's own layout
    assert plain["objects"][0]["last_epoch"] == 0


def _no_cuda_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with a GPU (faked) whose CUDA RNG must not be touched."""

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("the CUDA RNG touched by a run on the CPU")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", refused)
    monkeypatch.setattr(torch.cuda, "set_rng_state", refused)


def test_a_cpu_run_on_a_gpu_machine_saves_and_restores_no_cuda_rng(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script kept on the CPU (``accel.device(accelerator=False)``) on a GPU
    machine: its state is the one it would save on a CPU machine (no CUDA RNG
    states), and restoring a state that holds some (a GPU run's) leaves CUDA
    alone. Before, both read or set CUDA's RNG whenever CUDA existed."""
    accel.device(accelerator=False)
    _no_cuda_rng(monkeypatch)
    model, optimizer, scheduler = _setup()
    _train(model, optimizer)
    accel.save_state(tmp_path / "state", scheduler)
    own = torch.load(tmp_path / "state" / "rank0.pt", weights_only=False)
    assert set(own["rng"]) >= {"torch", "python"}
    assert "cuda" not in own["rng"]
    # the same folder as a GPU run would have written it
    own["rng"]["cuda"] = [torch.zeros(16, dtype=torch.uint8)]
    torch.save(own, tmp_path / "state" / "rank0.pt")
    after_save = torch.rand(1)
    assert accel.load_state(tmp_path / "state", scheduler) is not None
    assert torch.equal(torch.rand(1), after_save), "the CPU RNG is restored"


def test_cuda_rng_states_are_saved_and_restored_for_a_run_on_the_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The flag decides, not the machine: a GPU run saves every device's state
    and restores those the machine has; a state without them (a CPU run's)
    restores nothing of CUDA's."""
    saved = [
        torch.full((16,), 1, dtype=torch.uint8),
        torch.full((16,), 2, dtype=torch.uint8),
    ]
    restored: list[tuple[int, int]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: saved)
    monkeypatch.setattr(
        torch.cuda,
        "set_rng_state",
        lambda state, device: restored.append((int(state[0]), device)),
    )
    state = checkpoint._rng_state(True)
    assert state["cuda"] is saved
    assert "cuda" not in checkpoint._rng_state(False)
    checkpoint._set_rng_state(state, True)
    assert restored == [(1, 0)], "only the devices this machine has"
    restored.clear()
    checkpoint._set_rng_state(checkpoint._rng_state(False), True)
    checkpoint._set_rng_state(state, False)
    assert restored == []
