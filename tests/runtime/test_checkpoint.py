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
    with pytest.warns(UserWarning, match="a state saved by 3: the data order"):
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
