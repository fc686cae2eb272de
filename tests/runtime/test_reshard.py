"""A job saved under FSDP at world 2 resumes at worlds 1 and 3 and continues the
uninterrupted loss curve; its state folder holds one shard file per rank, and
converts to a plain state dict. Three start-ups in all (worlds 2, 1 and 3).

World 3 runs FSDP (2 ranks' shards laid out over 3); world 1 runs DDP, so the
shards are read into whole tensors, another strategy than the one that saved.
(FSDP at world 1 reads them as world 3 does, over a mesh of one.)"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from accel_migrate.runtime import checkpoint
from tests import warm_python

pytestmark = pytest.mark.multiprocess

SCRIPT = Path(__file__).parent / "scripts" / "reshard.py"
STEP_LOSS = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)
SAVE_AFTER, STEPS = 2, 8
WARNING = "resuming at {world} a state saved by 2 processes"


def _launch(nproc: int, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [
            *warm_python.launcher(),
            "--nproc",
            str(nproc),
            "--strategy",
            "fsdp",
            str(SCRIPT),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done


def _one_process(*args: str) -> subprocess.CompletedProcess[str]:
    """World 1 as torchrun starts it (its variables, one process), without the
    launcher and agent processes: a start-up of one interpreter instead of three."""
    # (a world of one: its own store binds the port it is given, 0 a free one)
    world_one = {
        "WORLD_SIZE": "1",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "0",
        "ACCEL_MIGRATE_STRATEGY": "ddp",
    }
    done = subprocess.run(
        [warm_python.executable(), str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
        env={**os.environ, **world_one},
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done


def _losses(out: str) -> dict[int, float]:
    return {int(step): float(loss) for step, loss in STEP_LOSS.findall(out)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    work = tmp_path_factory.mktemp("reshard")
    state = str(work / "state")
    saved = _launch(2, state, str(work), "save")
    # The two resumes only read the folder: run them side by side (start-ups
    # and rendezvous mostly wait).
    with ThreadPoolExecutor(2) as pool:
        one = pool.submit(_one_process, state, str(work), "resume")
        three = pool.submit(_launch, 3, state, str(work), "resume")
        resumed = {1: one.result(), 3: three.result()}
    return {"work": work, "saved": saved, "resumed": resumed}


@pytest.mark.parametrize("world", [1, 3])
def test_resumed_at_another_world_size_continues_the_curve(
    runs: dict[str, object], world: int
) -> None:
    whole = _losses(runs["saved"].stdout)  # type: ignore[attr-defined]
    done = runs["resumed"][world]  # type: ignore[index]
    got = _losses(done.stdout)
    assert sorted(whole) == list(range(STEPS)), "the world-2 run trained every step"
    assert sorted(got) == list(range(SAVE_AFTER + 1, STEPS)), done.stdout
    for step, loss in got.items():
        assert abs(loss - whole[step]) <= 1e-5 * abs(
            whole[step]
        ), f"world {world} step {step}: {loss} vs {whole[step]}"
    # Said once (rank 0), since a model with dropout would not continue the same.
    processes = "1 process" if world == 1 else f"{world} processes"
    assert done.stderr.count(WARNING.format(world=processes)) == 1, done.stderr
    work: Path = runs["work"]  # type: ignore[assignment]
    expected = torch.load(work / "final-2.pt")
    final = torch.load(work / f"final-{world}.pt")  # one plain file, original keys
    assert list(final) == list(expected)
    for name, tensor in expected.items():
        torch.testing.assert_close(final[name], tensor, rtol=1e-5, atol=1e-6)


def test_each_rank_wrote_its_own_shards_and_nothing_was_gathered(
    runs: dict[str, object],
) -> None:
    state: Path = runs["work"] / "state"  # type: ignore[operator]
    assert sorted(p.name for p in (state / "tensors").glob("*.distcp")) == [
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    shared = torch.load(state / "shared.pt", weights_only=False)
    assert "models" not in shared and "optimizers" not in shared
    tensors = [
        v
        for v in [*shared["objects"], shared["values"], *shared["optimizer_parts"]]
        if isinstance(v, torch.Tensor)
    ]
    assert not tensors, "rank 0's file holds no model or optimizer tensors"


def test_the_folder_converts_to_plain_state_dicts(
    runs: dict[str, object], tmp_path: Path
) -> None:
    work: Path = runs["work"]  # type: ignore[assignment]
    out = tmp_path / "model.pt"
    assert (
        checkpoint.main(["convert", str(work / "state"), str(out), "--model", "0"]) == 0
    )
    model, expected = torch.load(out), torch.load(work / "at_save.pt")
    assert list(model) == list(expected)
    for name, tensor in expected.items():
        assert torch.equal(model[name], tensor), name
    whole = checkpoint.read_plain_state(work / "state")
    optimizer = whole["optimizers"][0]
    assert optimizer["param_groups"][0]["params"] == list(range(6))
    assert optimizer["state"][0]["exp_avg"].shape == expected["0.weight"].shape
    assert int(optimizer["state"][0]["step"]) == SAVE_AFTER + 1
