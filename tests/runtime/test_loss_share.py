"""How ``accel.backward`` and ``accel.global_loss`` weigh a rank's loss for each
reduction: sample mean, sum, and a mean over a count (tokens).

One process stands for rank 0 of two; its collectives add what the other rank
contributes, given by each test. The weighted gradient of the rank, averaged by
the gradient exchange (divided by 2), must be the rank's part of the gradient
of the original loss over the global batch.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import Runtime, reset_runtime
from accel_migrate.runtime.comm import Collectives
from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.env import DistEnv


class Peer(Collectives):
    """Rank 0 of two: ``all_reduce`` adds the next value the other rank holds."""

    def __init__(self, env: DistEnv) -> None:
        super().__init__(env, torch.device("cpu"))
        self.peer: list[float] = []
        self.sent: list[float] = []

    def all_reduce(self, tensor: torch.Tensor, op: Any = "sum") -> torch.Tensor:
        self.sent.append(float(tensor))
        return tensor.detach().clone() + self.peer.pop(0)


@pytest.fixture
def peer() -> Any:
    runtime = Runtime(RuntimeConfig(), DistEnv())
    runtime.env = DistEnv(rank=0, world_size=2, local_world_size=2, launched=True)
    runtime.comm = Peer(runtime.env)
    previous = reset_runtime(runtime)
    yield runtime
    reset_runtime(previous)


def _weighted_grad(**kwargs: Any) -> float:
    """The gradient ``accel.backward`` leaves for d(w * 1)/dw = 1."""
    w = torch.tensor(1.0, requires_grad=True)
    accel.backward(w * 1.0, **kwargs)
    assert w.grad is not None
    return float(w.grad)


def test_a_sample_mean_is_weighted_by_the_sample_share(peer: Runtime) -> None:
    peer.set_batch_share(3, 4)
    assert _weighted_grad() == pytest.approx(2 * 3 / 4)
    assert _weighted_grad(reduction="mean") == pytest.approx(2 * 3 / 4)


def test_a_sum_has_weight_world_size_so_the_average_is_the_sum_of_sums(
    peer: Runtime,
) -> None:
    peer.set_batch_share(1, 4)  # the share's size does not matter for a sum
    assert _weighted_grad(reduction="sum") == pytest.approx(2.0)


def test_a_sum_over_an_unsharded_batch_is_the_same_sum_on_every_rank(
    peer: Runtime,
) -> None:
    # No sharded loader: each rank's sum is the whole sum; averaging keeps it.
    assert _weighted_grad(reduction="sum") == pytest.approx(1.0)


def test_a_token_mean_is_weighted_by_the_token_counts_of_all_ranks(
    peer: Runtime,
) -> None:
    peer.set_batch_share(2, 4)  # half the samples, but 3 of the 4 tokens
    peer.comm.peer = [1.0]  # type: ignore[attr-defined]
    assert _weighted_grad(count=torch.tensor(3)) == pytest.approx(2 * 3 / 4)
    assert peer.comm.sent == [3.0]  # type: ignore[attr-defined]


def test_a_rank_without_tokens_weighs_nothing(peer: Runtime) -> None:
    peer.comm.peer = [0.0]  # type: ignore[attr-defined]
    assert _weighted_grad(count=0) == 0.0


def test_global_loss_combines_a_loss_as_backward_weighted_it(peer: Runtime) -> None:
    peer.set_batch_share(2, 4)
    w = torch.tensor(1.0, requires_grad=True)
    loss = w * 5.0
    accel.backward(loss, reduction="sum")
    peer.comm.peer = [7.0, 7.0]  # type: ignore[attr-defined]
    assert accel.global_loss(loss).item() == pytest.approx(5.0 + 7.0)
    # loss.data shares the loss's storage: the same loss, as a logged read has it
    assert accel.global_loss(loss.data).item() == pytest.approx(5.0 + 7.0)
    # The peer holds 1 token, with loss 2.0: it sends its count, then 2.0 * 1/4
    # (the loop asked for the global loss, so it is reduced during backward).
    peer.comm.peer = [1.0, 2.0 * 1 / 4]  # type: ignore[attr-defined]
    token_loss = w * 4.0
    accel.backward(token_loss, count=3)
    assert accel.global_loss(token_loss).item() == pytest.approx((4.0 * 3 + 2.0) / 4)


def test_global_loss_of_another_tensor_is_a_sample_mean_unless_told(
    peer: Runtime,
) -> None:
    peer.set_batch_share(1, 4)
    peer.comm.peer = [3.0 * 3 / 4]  # type: ignore[attr-defined]
    assert accel.global_loss(torch.tensor(1.0)).item() == pytest.approx(
        (1.0 * 1 + 3.0 * 3) / 4
    )
    peer.comm.peer = [3.0]  # type: ignore[attr-defined]
    assert accel.global_loss(torch.tensor(1.0), reduction="sum").item() == 4.0
    peer.comm.peer = [4.0, 6.0 * 4 / 5]  # type: ignore[attr-defined]
    assert accel.global_loss(torch.tensor(1.0), count=1).item() == pytest.approx(
        (1.0 * 1 + 6.0 * 4) / 5
    )


def test_a_sequence_of_losses_gets_one_weight_and_its_gradients(
    peer: Runtime,
) -> None:
    peer.set_batch_share(1, 4)
    w = torch.tensor(1.0, requires_grad=True)
    accel.backward([w * 1.0, w * 2.0], [torch.tensor(1.0), torch.tensor(0.5)])
    assert w.grad is not None
    assert float(w.grad) == pytest.approx(2 * 1 / 4 * (1.0 + 2.0 * 0.5))
    w.grad = None
    accel.backward((w * 1.0, w * 3.0), reduction="sum")
    assert float(w.grad) == pytest.approx(2 * (1.0 + 3.0))


def test_wrong_reductions_are_refused(peer: Runtime) -> None:
    w = torch.tensor(1.0, requires_grad=True)
    with pytest.raises(ValueError, match="reduction must be one of"):
        accel.backward(w * 1.0, reduction="none")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="takes no count"):
        accel.backward(w * 1.0, reduction="sum", count=3)
    with pytest.raises(TypeError, match="sequence of tensors"):
        accel.backward([w * 1.0, 2.0])  # type: ignore[list-item]


def test_one_process_is_the_plain_backward() -> None:
    previous = reset_runtime(None)
    try:
        w = torch.tensor(1.0, requires_grad=True)
        accel.backward(w * 2.0, reduction="sum")
        accel.backward(w * 3.0, count=5)
        assert float(w.grad) == 5.0  # type: ignore[arg-type]
        loss = w * 1.0
        assert accel.global_loss(loss, reduction="sum") is loss
    finally:
        reset_runtime(previous)
