"""``accel.global_loss`` of the loss given to ``accel.backward`` is reduced while
backward runs, once the script has shown that it asks for it every step.

One process, with a recording stand-in for the collectives of rank 0 of two: what
matters is which collectives start, in which order (the same on every rank), and
that the values are those of the synchronous reduction.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import Runtime, reset_runtime
from accel_migrate.runtime.comm import Collectives, PendingReduce
from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.env import DistEnv


class Recorder(Collectives):
    """Rank 0 of two whose peer contributes the same value: sums double."""

    def __init__(self, env: DistEnv) -> None:
        super().__init__(env, torch.device("cpu"))
        self.calls: list[str] = []

    def all_reduce(self, tensor: torch.Tensor, op: Any = "sum") -> torch.Tensor:
        self.calls.append("all_reduce")
        return tensor.detach().clone() * 2

    def all_reduce_async(self, tensor: torch.Tensor, op: Any = "sum") -> PendingReduce:
        self.calls.append("all_reduce_async")
        return PendingReduce(tensor.detach().clone() * 2)


@pytest.fixture
def recorder() -> Any:
    runtime = Runtime(RuntimeConfig(), DistEnv())
    runtime.env = DistEnv(rank=0, world_size=2, local_world_size=2, launched=True)
    runtime.comm = Recorder(runtime.env)
    runtime.set_batch_share(3, 4)  # this rank holds 3 of the global batch's 4 samples
    previous = reset_runtime(runtime)
    yield runtime.comm
    reset_runtime(previous)


def _loss(value: float) -> torch.Tensor:
    weight = torch.tensor(value, requires_grad=True)
    return weight * 1.0


def test_the_reduction_starts_in_backward_once_the_loop_asks_for_it(
    recorder: Recorder,
) -> None:
    first = _loss(1.0)
    accel.backward(first)
    assert recorder.calls == []  # nothing known yet about the script
    assert accel.global_loss(first).item() == pytest.approx(2 * 1.0 * 0.75)
    assert recorder.calls == ["all_reduce"]

    for value in (2.0, 3.0):
        loss = _loss(value)
        accel.backward(loss)
        assert recorder.calls[-1] == "all_reduce_async"
        calls = len(recorder.calls)
        assert accel.global_loss(loss).item() == pytest.approx(2 * value * 0.75)
        assert len(recorder.calls) == calls  # waited, nothing new started


def test_an_unclaimed_reduction_stops_the_overlap(recorder: Recorder) -> None:
    first = _loss(1.0)
    accel.backward(first)
    accel.global_loss(first)
    accel.backward(_loss(2.0))  # started, then never asked for
    accel.backward(third := _loss(3.0))
    assert recorder.calls == ["all_reduce", "all_reduce_async"]
    assert accel.global_loss(third).item() == pytest.approx(2 * 3.0 * 0.75)
    assert recorder.calls[-1] == "all_reduce"  # asked again: overlap resumes next time
    accel.backward(_loss(4.0))
    assert recorder.calls[-1] == "all_reduce_async"


def test_other_tensors_are_reduced_when_asked(recorder: Recorder) -> None:
    loss = _loss(1.0)
    accel.global_loss(loss)  # before backward: plain reduction, no overlap later
    accel.backward(loss)
    accel.backward(_loss(2.0))
    assert recorder.calls == ["all_reduce"]
    other = torch.tensor(5.0)
    assert accel.global_loss(other).item() == pytest.approx(2 * 5.0 * 0.75)
    assert recorder.calls == ["all_reduce", "all_reduce"]


_READS = ("item", "tolist", "__float__", "__int__", "__bool__", "cpu", "numpy")


def _count_reads(monkeypatch: pytest.MonkeyPatch, reads: list[str]) -> None:
    for name in _READS:
        original = getattr(torch.Tensor, name)

        def counted(self: torch.Tensor, *a: Any, _n: str = name, _o: Any = original):
            reads.append(_n)
            return _o(self, *a)

        monkeypatch.setattr(torch.Tensor, name, counted)


def test_a_rank_with_a_value_reads_nothing_back(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No value comes back to the host in ``global_loss`` of a rank that has
    one (on a GPU each read waits for the queued work: before r32b the facts
    of every call were read, a device sync per logged loss); the fresh
    all-reduce and the one started in backward alike."""
    first = _loss(1.0)
    accel.backward(first)
    reads: list[str] = []
    _count_reads(monkeypatch, reads)
    got = [accel.global_loss(first)]
    monkeypatch.undo()
    loss = _loss(2.0)
    accel.backward(loss)
    assert recorder.calls[-1] == "all_reduce_async"
    _count_reads(monkeypatch, reads)
    got.append(accel.global_loss(loss))
    got.append(accel.global_loss(torch.ones(2, 3)))  # a tensor: two all-reduces
    monkeypatch.undo()
    assert reads == []
    assert [tuple(g.shape) for g in got] == [(), (), (2, 3)]
    assert got[0].item() == pytest.approx(2 * 1.0 * 0.75)
    assert got[1].item() == pytest.approx(2 * 2.0 * 0.75)
    assert torch.allclose(got[2], torch.full((2, 3), 2 * 0.75))
