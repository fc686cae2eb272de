"""Lazy epochs (``runtime.data``, epochs over ``EAGER_LIMIT`` batches): minGPT-style
``RandomSampler(ds, replacement=True, num_samples=int(1e10))`` gives its first
batch at once and in flat memory, with the original's global batches, and resumes
mid-epoch from ``accel_position``."""

from __future__ import annotations

import re
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

from accel_migrate.runtime import data
from accel_migrate.runtime.data import (
    GlobalBatchSlices,
    PerDeviceBatches,
    ShardingError,
    shard_loader,
)
from tests import warm_python

from .fakes import FakeRuntime

DATASET = TensorDataset(torch.arange(1000))


def _huge_loader(generator: torch.Generator | None = None) -> DataLoader:
    sampler = RandomSampler(
        DATASET, replacement=True, num_samples=int(1e10), generator=generator
    )
    return DataLoader(DATASET, batch_size=8, sampler=sampler)


def _take(iterator: Any, steps: int) -> list[list[int]]:
    return [next(iterator)[0].tolist() for _ in range(steps)]


def _sharded(rank: int, world: int, published: dict, loader: DataLoader) -> Any:
    return shard_loader(loader, FakeRuntime(rank, world, published))  # type: ignore[arg-type]


@pytest.mark.parametrize("world", [1, 2])
def test_first_batch_at_once_and_memory_flat(world: int) -> None:
    published: dict = {}
    for rank in range(world):
        loader = _sharded(rank, world, published, _huge_loader())
        start = time.perf_counter()
        iterator = iter(loader)
        next(iterator)
        assert time.perf_counter() - start < 1.0
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        for _ in range(20000):
            next(iterator)
        grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        assert grown_kib < 20 * 1024, f"{grown_kib} KiB more after 20000 steps"
        assert len(loader.batch_sampler.plan.shares) < 10, "shares are let go"


@pytest.mark.parametrize("drift", [False, True])
def test_lazy_slices_are_the_original_batches(drift: bool) -> None:
    torch.manual_seed(3)
    expected = _take(iter(_huge_loader()), 200)
    after_original = torch.get_rng_state()
    published: dict = {}
    per_rank = []
    for rank in range(2):
        torch.manual_seed(3 if rank == 0 or not drift else 77)
        per_rank.append(_take(iter(_sharded(rank, 2, published, _huge_loader())), 200))
        # Every rank, drifted or not, goes on from the original's state.
        assert torch.equal(torch.get_rng_state(), after_original), f"rank {rank}"
    for step, batch in enumerate(expected):
        assert per_rank[0][step] + per_rank[1][step] == batch
        assert len(per_rank[0][step]) == len(per_rank[1][step]) == 4


def test_small_epochs_drawn_lazily_match_the_eager_draw(monkeypatch) -> None:
    loader = DataLoader(TensorDataset(torch.arange(37)), batch_size=8, shuffle=True)
    eager = []
    for limit in (10**9, 0):
        monkeypatch.setattr(data, "EAGER_LIMIT", limit)
        published: dict = {}
        runs = []
        for rank in range(2):
            torch.manual_seed(5)
            sampler = GlobalBatchSlices(loader.batch_sampler, FakeRuntime(rank, 2, published))  # type: ignore[arg-type]
            runs.append([list(b) for b in sampler])
        eager.append(runs)
    assert eager[0] == eager[1]
    assert sum(len(b) for b in eager[1][0] + eager[1][1]) == 37


@pytest.mark.parametrize("own_generator", [False, True])
def test_resume_mid_epoch_draws_the_same_rest(own_generator: bool) -> None:
    def loader() -> DataLoader:
        generator = torch.Generator().manual_seed(9) if own_generator else None
        return _huge_loader(generator)

    torch.manual_seed(4)
    first = _sharded(0, 1, {}, loader())
    iterator = iter(first)
    expected = _take(iterator, 30)
    position = first.accel_position()
    assert position["step"] == 30 and position["batches"] is None
    rest = _take(iterator, 20)

    torch.manual_seed(123)  # the resumed process starts elsewhere
    resumed = _sharded(0, 1, {}, loader())
    resumed.accel_resume(position)
    assert _take(iter(resumed), 20) == rest
    assert expected, "the first run trained"


def test_a_sampler_disagreeing_at_the_first_step_gets_rank_zero_batches() -> None:
    published: dict = {"gathered": [1, 2]}  # the digests differ
    rank0 = _sharded(0, 2, published, _huge_loader(torch.Generator().manual_seed(1)))
    zero = _take(iter(rank0), 5)
    rank1 = _sharded(1, 2, published, _huge_loader(torch.Generator().manual_seed(2)))
    one = _take(iter(rank1), 5)
    torch.manual_seed(0)
    reference = _take(iter(_huge_loader(torch.Generator().manual_seed(1))), 5)
    assert [a + b for a, b in zip(zero, one, strict=True)] == reference


def test_a_sampler_disagreeing_later_fails(monkeypatch) -> None:
    runtime = FakeRuntime(0, 2, {})
    calls = []

    def gather(obj: Any) -> list[Any]:
        calls.append(obj)
        return [obj, obj] if len(calls) < 3 else [obj, -1]

    monkeypatch.setattr(runtime.comm, "all_gather_object", gather)
    iterator = iter(shard_loader(_huge_loader(), runtime))  # type: ignore[arg-type]
    _take(iterator, 2)  # checked at steps 0 and 1
    with pytest.raises(ShardingError, match="different batches on different ranks"):
        _take(iterator, 2)  # step 2 disagrees


def test_per_device_mode_refuses_a_huge_epoch() -> None:
    sampler = PerDeviceBatches(_huge_loader().batch_sampler, FakeRuntime(0, 2, {}, "per-device"))  # type: ignore[arg-type]
    with pytest.raises(ShardingError, match="per-device"):
        next(iter(sampler))


@pytest.mark.multiprocess
def test_launched_at_world_2_like_the_original_and_resumed(tmp_path: Path) -> None:
    script = str(Path(__file__).parent / "scripts" / "lazy_sampler.py")
    launch = [*warm_python.launcher(), "--nproc", "2"]
    runs = {}
    for name, command in (
        ("original", [warm_python.executable(), script, str(tmp_path / "plain")]),
        ("world2", [*launch, script, str(tmp_path / "state")]),
        ("resumed", [*launch, script, str(tmp_path / "state"), "--resume"]),
    ):
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=warm_python.timeout(180),
            check=False,
        )
        assert done.returncode == 0, f"{name}\n{done.stdout}\n{done.stderr}"
        runs[name] = done.stdout
    for name, out in runs.items():
        seconds = float(re.search(r"^first batch (\S+)s$", out, re.MULTILINE)[1])
        assert seconds < 1.0, f"{name}: first batch after {seconds}s"
        grown = int(re.search(r"^memory grew (\d+) KiB$", out, re.MULTILINE)[1])
        assert grown < 50 * 1024, f"{name}: {grown} KiB"
    batches = {
        name: re.findall(r"^batch (\d+) (.*)$", out, re.MULTILINE)
        for name, out in runs.items()
    }
    assert len(batches["original"]) == 20
    assert batches["world2"] == batches["original"]
    assert batches["resumed"] == batches["original"][10:]
    losses = {
        name: [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", out, re.M)]
        for name, out in runs.items()
    }
    for name, offset in (("world2", 0), ("resumed", 10)):
        expected = losses["original"][offset:]
        assert len(losses[name]) == len(expected)
        for e, g in zip(expected, losses[name], strict=True):
            assert abs(g - e) <= 1e-5 * abs(e), f"{name}: {g} vs {e}"
