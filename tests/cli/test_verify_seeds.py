"""``verify``'s diagnosis of a seed offset by the rank
(``torch.manual_seed(seed + rank)``): rank 0 runs as the original, the other
ranks draw their own numbers from the first step, while the initial weights
(broadcast) and the data order (drawn under rank 0's state) agree. The cause
named was "data order"; it is the seed, which the runner records on every
process (``accel_migrate/verify/seeds.py``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from accel_migrate.verify.compare import compare
from accel_migrate.verify.seeds import seeds_apart


def _record(losses: list[float], **facts: object) -> dict:
    return {
        "losses": losses,
        "loss_steps": list(range(len(losses))),
        "steps": len(losses),
        "parameters": [{"numel": 2, "sum": 1.0, "sumsq": 0.5}],
        "initial_parameters": [{"numel": 2, "sum": 0.5, "sumsq": 0.25}],
        "facts": {"batchnorm_training": False, "dropout_training": False, **facts},
    }


SEEDS = "torch.manual_seed(1) on rank 0, torch.manual_seed(2) on rank 1"


def test_a_first_loss_apart_with_seeds_apart_names_the_seed() -> None:
    verdict = compare(
        _record([0.57, 1.49]), _record([0.61, 1.52], seeds_apart=SEEDS), 1e-5, 2
    )
    assert verdict.first_divergence is not None
    assert verdict.first_divergence.index == 0
    assert len(verdict.causes) == 1, verdict.causes
    cause = verdict.causes[0]
    assert cause.startswith(f"a seed that differs between the processes: {SEEDS}")
    assert "torch.manual_seed(seed + rank)" in cause
    assert "from the first step" in cause
    assert not cause.startswith("data order")


def _calls(*calls: tuple[str, object, int]) -> list[tuple[str, str, int]]:
    return [(name, repr(value), step) for name, value, step in calls]


def test_a_seed_offset_by_the_rank_at_the_start_is_named() -> None:
    every = [
        _calls(("random.seed", 7, 0), ("torch.manual_seed", 0 + rank, 0))
        for rank in range(2)
    ]
    assert seeds_apart(every) == (
        "torch.manual_seed(0) on rank 0, torch.manual_seed(1) on rank 1"
    )


def test_a_seed_per_sample_names_no_seed() -> None:
    # random.seed(i) in __getitem__: each process seeds with the indices of its
    # own share (r30e named "random.seed(0) on rank 0, random.seed(4) on rank 1")
    every = [
        _calls(
            ("torch.manual_seed", 0, 0),
            *[
                ("random.seed", i, step)
                for step in range(4)
                for i in range(8 * step + 4 * rank, 8 * step + 4 * rank + 4)
            ],
        )
        for rank in range(2)
    ]
    assert seeds_apart(every) is None
    # a dataset of few samples: fewer calls, but during the training steps
    few = [
        _calls(("random.seed", rank, 0), ("random.seed", 2 + rank, 1))
        for rank in range(2)
    ]
    assert seeds_apart(few) is None


def test_a_seed_on_the_main_process_only_names_no_seed() -> None:
    # `if accel.is_main_process(): torch.manual_seed(123)` after each step (r30e
    # named "torch.manual_seed(123) on rank 0, no such seed on rank 1")
    every = [
        _calls(("torch.manual_seed", 0, 0)),
        _calls(("torch.manual_seed", 0, 0)),
    ]
    every[0] += _calls(*[("torch.manual_seed", 123, step) for step in range(1, 5)])
    assert seeds_apart(every) is None
    # once, before the first step, on rank 0 only: no seed either
    once = [_calls(("torch.manual_seed", 123, 0)), []]
    assert seeds_apart(once) is None


def test_a_seed_set_alike_names_no_seed() -> None:
    every = [_calls(("torch.manual_seed", 0, 0), ("random.seed", 0, 0))] * 2
    assert seeds_apart(every) is None


def test_without_seeds_apart_a_first_loss_apart_is_still_data_order() -> None:
    verdict = compare(_record([0.57, 1.49]), _record([0.61, 1.52]), 1e-5, 2)
    assert [c.split(":")[0] for c in verdict.causes] == ["data order"]


SCRIPT = textwrap.dedent("""
    import os, random
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    def run(rank, store_path):
        store = dist.FileStore(store_path, 2)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
        from accel_migrate.verify.seeds import Seeds
        seeds = Seeds()
        seeds.install()
        random.seed(7)
        torch.manual_seed(0)
        alike = seeds.apart()
        torch.manual_seed(1 + rank)
        apart = seeds.apart()
        if rank == 0:
            print(repr(alike))
            print(repr(apart))
        dist.destroy_process_group()

    if __name__ == "__main__":
        import sys
        # a file store, not a port (a free port closed, then bound by the
        # spawned processes, was taken in between once: EADDRINUSE)
        mp.spawn(run, args=(sys.argv[1],), nprocs=2)
    """)


@pytest.mark.multiprocess
def test_the_processes_seeds_are_compared(tmp_path: Path) -> None:
    script = tmp_path / "seeds.py"  # (spawned processes import it by path)
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-2:] == [
        "None",
        "'torch.manual_seed(1) on rank 0, torch.manual_seed(2) on rank 1'",
    ]
