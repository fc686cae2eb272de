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


def test_without_seeds_apart_a_first_loss_apart_is_still_data_order() -> None:
    verdict = compare(_record([0.57, 1.49]), _record([0.61, 1.52]), 1e-5, 2)
    assert [c.split(":")[0] for c in verdict.causes] == ["data order"]


SCRIPT = textwrap.dedent("""
    import os, random
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    def run(rank, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=2)
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
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(run, args=(port,), nprocs=2)
    """)


@pytest.mark.multiprocess
def test_the_processes_seeds_are_compared(tmp_path: Path) -> None:
    script = tmp_path / "seeds.py"  # (spawned processes import it by path)
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)],
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
