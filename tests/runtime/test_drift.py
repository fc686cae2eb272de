"""Copies of a prepared model that drift apart at the first update (round 25b):
after an AM040 miss, ``p.data -= lr * g`` with ``g`` from
``torch.autograd.grad(loss, params)``, or ``p.data.add_(p.grad, alpha=-lr)``
with those gradients written into ``p.grad``, runs no ``accel.backward`` and no
prepared optimizer, so no check of ``guards`` sees it. The first batches of the
sharded loader compare the copies (``runtime/drift.py``): the job stops on every
rank before its second step. The same update after ``accel.backward(loss)``
uses averaged gradients and trains; in a world of one nothing is checked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from accel_migrate.runtime.drift import DriftCheck, ParametersDivergedError
from accel_migrate.runtime.env import DistEnv
from tests import warm_python

SCRIPT = Path(__file__).parent / "scripts" / "updates_by_hand.py"


def _launch(mode: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            warm_python.executable(),
            *("-m", "accel_migrate", "launch", *options),
            str(SCRIPT),
            mode,
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(
            180
        ),  # a rank left waiting in a collective would hang until this
        check=False,
    )


@pytest.mark.multiprocess
@pytest.mark.parametrize("mode", ["grad_sgd", "grad_written"])
def test_an_update_with_unaveraged_gradients_stops_every_rank(mode: str) -> None:
    done = _launch(mode, "--nproc", "2")
    assert done.returncode == 1, done.stderr
    for rank in (0, 1):
        assert (
            f"[rank{rank}]: accel_migrate.runtime.drift.ParametersDivergedError: "
            "the parameters of Sequential (0.weight, 0.bias, 2.weight, 2.bias) "
            "changed differently on the 2 processes at their first update"
        ) in done.stderr, done.stderr
    assert "step 0.0" in done.stdout
    assert "step 0.1" not in done.stdout, "it stopped before the second step"


@pytest.mark.multiprocess
def test_the_same_update_after_accel_backward_trains() -> None:
    done = _launch("backward_sgd", "--nproc", "2")
    assert done.returncode == 0, done.stderr
    assert "step 1.2" in done.stdout and "trained" in done.stdout
    assert ParametersDivergedError.__name__ not in done.stderr


@pytest.mark.multiprocess
def test_a_world_of_one_checks_nothing() -> None:
    done = _launch("grad_sgd", "--nproc", "1")
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout


# -- in one process, with a stand-in peer -------------------------------------------------
class _Prepared:
    def __init__(self, module: torch.nn.Module) -> None:
        self.original_module = module
        self.forward_module: torch.nn.Module | None = None


class _Comm:
    """Rank 0 of two; the peer's checksums are ours, moved by ``peer_shift``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.peer_shift = 0.0
        self.peer_moved = False

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        self.calls.append(f"all_reduce {op}")
        return torch.maximum(tensor, torch.tensor([float(self.peer_moved)]))

    def all_gather_object(self, obj: list[float]) -> list[list[float]]:
        self.calls.append("all_gather_object")
        return [obj, [value + self.peer_shift for value in obj]]


class _Runtime:
    def __init__(self, *models: _Prepared) -> None:
        self.env = DistEnv(0, 2, 0, 2, launched=True)
        self.comm = _Comm()
        self.strategy = type(
            "S", (), {"shards_parameters": False, "wraps_optimizer": False}
        )()
        self.models = list(models)
        self.drift_check: DriftCheck | None = DriftCheck()

    def modules(self) -> list[_Prepared]:
        return self.models


def _batch(runtime: _Runtime) -> None:
    if runtime.drift_check is not None:
        runtime.drift_check.at_batch(runtime)  # type: ignore[arg-type]


def test_equal_copies_cost_a_few_collectives_then_nothing() -> None:
    model = _Prepared(torch.nn.Linear(3, 2))
    runtime = _Runtime(model)
    _batch(runtime)  # no wrapper built yet: nothing to compare
    assert runtime.comm.calls == []
    model.forward_module = model.original_module  # the first forward built it
    _batch(runtime)  # compared at once (an update may have run)
    _batch(runtime)  # nothing moved
    with torch.no_grad():
        model.original_module.weight.add_(1.0)  # an update, equal on the peer
    _batch(runtime)
    assert runtime.drift_check is None
    _batch(runtime)
    assert runtime.comm.calls == [
        "all_gather_object",
        "all_reduce max",
        "all_reduce max",
        "all_gather_object",
    ]


def test_copies_that_differ_once_built_stop_the_job() -> None:
    """The first update ran between the wrapper's broadcast and the next batch."""
    model = _Prepared(torch.nn.Linear(3, 2))
    model.forward_module = model.original_module
    runtime = _Runtime(model)
    runtime.comm.peer_shift = 1e-4
    with pytest.raises(ParametersDivergedError, match=r"Linear \(weight, bias\)"):
        _batch(runtime)
    assert runtime.drift_check is None


def test_sharded_parameters_are_not_compared() -> None:
    model = _Prepared(torch.nn.Linear(3, 2))
    model.forward_module = model.original_module
    runtime = _Runtime(model)
    runtime.strategy.shards_parameters = True
    runtime.comm.peer_shift = 1.0
    _batch(runtime)
    assert runtime.drift_check is None and runtime.comm.calls == []


def test_checksums_are_float64_sums_taken_a_chunk_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A parameter larger than a chunk (and one that is empty) gets the sums of
    one float64 pass over the whole tensor: the chunking bounds the check's own
    memory without changing what the processes compare."""
    from accel_migrate.runtime import drift

    monkeypatch.setattr(drift, "_CHUNK", 7)
    torch.manual_seed(0)
    params = [torch.randn(5, 9), torch.randn(3), torch.zeros(0), torch.randn(2, 2, 2)]
    expected = [
        value
        for p in params
        for value in (p.double().sum().item(), p.double().square().sum().item())
    ]
    assert drift._checksums(params) == pytest.approx(expected, rel=1e-13, abs=1e-13)
    # a change of one element's last bit moves its parameter's checksum
    moved = [p.clone() for p in params]
    moved[0].view(-1)[40] = torch.nextafter(moved[0].view(-1)[40], torch.tensor(9.0))
    changed = drift._checksums(moved)
    assert changed[:2] != drift._checksums(params)[:2]
    assert changed[2:] == drift._checksums(params)[2:]
