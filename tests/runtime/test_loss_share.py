"""How ``accel.backward`` and ``accel.global_loss`` weigh a rank's loss for each
reduction: sample mean, sum, and a mean over a count (tokens).

One process stands for rank 0 of two; its collectives add what the other rank
contributes, given by each test. The weighted gradient of the rank, averaged by
the gradient exchange (divided by 2), must be the rank's part of the gradient
of the original loss over the global batch.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime._state import Runtime, reset_runtime
from accel_migrate.runtime.comm import Collectives, PendingReduce
from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.data import ShardingError
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.loss_share import HEADER_SIZE, sum_shares
from accel_migrate.runtime.module import PreparedModule


class Peer(Collectives):
    """Rank 0 of two: ``all_reduce`` adds the next value the other rank holds."""

    def __init__(self, env: DistEnv) -> None:
        super().__init__(env, torch.device("cpu"))
        self.peer: list[float] = []
        self.sent: list[float] = []

    def all_reduce(self, tensor: torch.Tensor, op: Any = "sum") -> torch.Tensor:
        """A loss share goes with ``[has a value, fraction, size, shape]``
        (``loss_share.sum_shares``): the peer's value is a number (it has one,
        already weighted; its fraction is the rest of the whole) or None (its
        share is empty)."""
        other = self.peer.pop(0)
        if tensor.numel() == 1 + HEADER_SIZE:  # a scalar share and its facts
            self.sent.append(float(tensor[0]))
            rest = 1.0 - float(tensor[2])
            facts = [0.0] * (1 + HEADER_SIZE)
            if other is not None:
                facts[:3] = [other, 1.0, rest]
            return tensor.detach().clone() + torch.tensor(facts, dtype=tensor.dtype)
        self.sent.append(float(tensor))
        return tensor.detach().clone() + other


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


def _all_ignored_loss(peer: Runtime) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """A prepared model's masked token mean on a share whose tokens are all masked:
    0/0, and its backward divides by the zero count (NaN gradients)."""
    torch.manual_seed(0)
    net = nn.Linear(3, 4)
    model = PreparedModule(net, peer)
    per_token = F.cross_entropy(
        model(torch.randn(2, 3)), torch.tensor([1, 2]), reduction="none"
    )
    mask = torch.zeros(2)
    loss = (per_token * mask).sum() / mask.sum()
    assert torch.isnan(loss)
    return net, loss, mask.sum()


def test_a_share_with_no_tokens_adds_zero_gradients_not_nan(peer: Runtime) -> None:
    net, loss, count = _all_ignored_loss(peer)
    peer.comm.peer = [3.0]  # type: ignore[attr-defined]
    accel.backward(loss, count=count)
    for param in net.parameters():
        assert param.grad is not None
        assert torch.equal(param.grad, torch.zeros_like(param))
    # logged, the global loss is the other rank's: this rank's NaN weighs nothing
    peer.comm.peer = [1.5]  # type: ignore[attr-defined]
    assert accel.global_loss(loss).item() == pytest.approx(1.5)


def test_no_tokens_on_any_rank_stays_nan_as_in_the_original(peer: Runtime) -> None:
    net, loss, count = _all_ignored_loss(peer)
    peer.comm.peer = [0.0]  # type: ignore[attr-defined]
    accel.backward(loss, count=count)
    assert net.weight.grad is not None and torch.isnan(net.weight.grad).all()


def test_a_share_with_tokens_keeps_its_weighted_gradient(peer: Runtime) -> None:
    torch.manual_seed(0)
    net = nn.Linear(3, 4)
    x, y = torch.randn(2, 3), torch.tensor([1, -100])
    F.cross_entropy(net(x), y).backward()
    expected = net.weight.grad.clone()  # type: ignore[union-attr]
    net.zero_grad()
    peer.comm.peer = [3.0]  # type: ignore[attr-defined]
    accel.backward(F.cross_entropy(PreparedModule(net, peer)(x), y), count=1)
    assert net.weight.grad is not None
    assert torch.allclose(net.weight.grad, expected * 2 * 1 / 4)


def test_a_mean_over_two_loaders_with_other_shares_stops_the_step(
    peer: Runtime,
) -> None:
    """FixMatch's labelled and unlabelled loaders at the labelled one's short
    last batch: one weight cannot make both means global, so backward raises."""
    peer.set_batch_share(2, 3, source=1)
    peer.set_batch_share(6, 12, source=2)
    with pytest.raises(ShardingError, match=r"2 of 3, 6 of 12"):
        _weighted_grad()


def test_two_loaders_with_the_same_share_or_a_sum_are_weighted_as_before(
    peer: Runtime,
) -> None:
    peer.set_batch_share(4, 8, source=1)
    peer.set_batch_share(2, 4, source=2)
    assert _weighted_grad() == pytest.approx(2 * 2 / 4)
    peer.set_batch_share(2, 3, source=1)
    peer.set_batch_share(6, 12, source=2)
    assert _weighted_grad(reduction="sum") == pytest.approx(2.0)  # world x 1


def test_a_pass_that_ended_or_yielded_before_the_last_backward_is_not_the_steps(
    peer: Runtime,
) -> None:
    """An evaluation loop run to its end between two steps, and the training
    loader's batch of the step before, weigh nothing in this step's check."""
    peer.set_batch_share(2, 3, source=1)
    _weighted_grad()  # the step before: its batches are done with
    peer.set_batch_share(3, 5, source=2)
    peer.end_batch_shares(2)  # an evaluation pass, exhausted
    peer.set_batch_share(4, 8, source=1)
    assert _weighted_grad() == pytest.approx(2 * 4 / 8)


def test_a_sharded_pass_ends_its_share_when_it_is_left(peer: Runtime) -> None:
    """``next(iter(loader))`` then dropping the iterator, or a ``break``: the
    pass is closed and its share forgotten."""
    from torch.utils.data import DataLoader, TensorDataset

    from accel_migrate.runtime.data import shard_loader

    loader = DataLoader(TensorDataset(torch.arange(6.0)), batch_size=3)
    shard_loader(loader, peer)
    next(iter(loader))
    assert peer.take_step_shares() == []
    for _ in loader:
        break
    assert peer.take_step_shares() == []
    iterator = iter(loader)
    next(iterator)
    assert peer.take_step_shares() == [(2, 3)]


def test_global_loss_of_none_takes_part_with_no_share(peer: Runtime) -> None:
    """ConvNeXt's engine logs `class_acc = None` when Mixup is on (its
    MetricLogger skips None): every rank has None, None comes back. A rank whose
    share of a short last batch is empty (`acc = ... if len(y) else None`) sent
    nothing while the other waited out the collective timeout (t12c): it now
    takes part with no share, and gets the other ranks' value."""
    peer.set_batch_share(2, 4)
    peer.comm.peer = [None]  # type: ignore[attr-defined]
    assert accel.global_loss(None) is None
    assert peer.comm.sent == [0.0]  # type: ignore[attr-defined]
    # the peer has a value: it comes back here too
    peer.comm.peer = [3.0]  # type: ignore[attr-defined]
    assert accel.global_loss(None).item() == pytest.approx(3.0)
    # this rank has a value, the peer None: this rank's value is the mean
    peer.set_batch_share(4, 4)
    peer.comm.peer = [None]  # type: ignore[attr-defined]
    assert accel.global_loss(torch.tensor(2.0)).item() == pytest.approx(2.0)
    peer.set_batch_share(2, 4)
    peer.comm.peer = [None]  # type: ignore[attr-defined]
    assert accel.global_loss(torch.tensor(2.0)).item() == pytest.approx(2.0)
    # both have values: the weighted sum, as before
    peer.comm.peer = [1.5]  # type: ignore[attr-defined]
    assert accel.global_loss(torch.tensor(2.0)).item() == pytest.approx(1.0 + 1.5)


class ThreadComm:
    """Ranks as threads: ``all_reduce`` returns the sum of every rank's tensor
    (what the process group does), so ``sum_shares`` runs as on each rank.

    A round waits as long as the threads need on a loaded machine (no short
    first barrier: a 10 s one risked timing out on a busy 2-core runner), and
    fails at once when a rank is gone (``abort``) or after a long bound."""

    #: The longest wait for the other ranks (a rank that is neither here nor gone).
    BOUND_S = 300.0

    def __init__(self, world_size: int) -> None:
        self.env = DistEnv(rank=0, world_size=world_size, launched=True)
        self.device = torch.device("cpu")
        self._cond = threading.Condition()
        self._sent: list[torch.Tensor] = []
        self._round = 0
        self._totals: dict[int, torch.Tensor] = {}
        self.started = 0  # all_reduce_async calls, every rank's
        self.gone = False

    def all_reduce(self, tensor: torch.Tensor, op: Any = "sum") -> torch.Tensor:
        with self._cond:
            if self.gone:
                raise threading.BrokenBarrierError("a rank is gone")
            this_round = self._round
            self._sent.append(tensor.detach().clone())
            if len(self._sent) == self.env.world_size:
                self._totals[this_round] = torch.stack(self._sent).sum(0)
                self._sent = []
                self._round += 1
                self._cond.notify_all()
            elif (
                not self._cond.wait_for(
                    lambda: self._round > this_round or self.gone, timeout=self.BOUND_S
                )
                or self._round == this_round
            ):
                raise threading.BrokenBarrierError("a rank is gone")
            return self._totals[this_round].clone()

    def abort(self) -> None:
        """A rank raised (its process ended): the others' collectives that
        wait for it fail at once (BrokenBarrierError, a RuntimeError)."""
        with self._cond:
            self.gone = True
            self._cond.notify_all()

    def all_reduce_async(self, tensor: torch.Tensor, op: Any = "sum") -> PendingReduce:
        self.started += 1
        return PendingReduce(self.all_reduce(tensor, op))


def _on_ranks(values: list[torch.Tensor | None], fractions: list[float]) -> list[Any]:
    comm = ThreadComm(len(values))
    results: list[Any] = [None] * len(values)

    def rank(i: int) -> None:
        weighted = None if values[i] is None else values[i] * fractions[i]
        results[i] = sum_shares(comm, weighted, fractions[i])

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(len(values))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_a_rank_without_a_mean_takes_the_others_shares_anew() -> None:
    # three shares of 4, 4 and 0 rows: the mean of the two with rows
    got = _on_ranks([torch.tensor(2.0), torch.tensor(4.0), None], [1 / 3, 1 / 3, 0.0])
    assert [float(g) for g in got] == pytest.approx([3.0, 3.0, 3.0])


def test_a_rank_without_a_sum_adds_nothing() -> None:
    # a sum's fraction is 1 on every rank (rev10: it was divided by 2, the mean)
    got = _on_ranks([torch.tensor(5.0), torch.tensor(7.0), None], [1.0, 1.0, 1.0])
    assert [float(g) for g in got] == pytest.approx([12.0, 12.0, 12.0])


def test_a_rank_without_a_value_gets_the_others_shape() -> None:
    value = torch.arange(4.0).reshape(2, 2)
    got = _on_ranks([value, None], [1.0, 1.0])
    assert [tuple(g.shape) for g in got] == [(2, 2), (2, 2)]
    assert torch.equal(got[1], value)


def test_no_rank_with_a_value_is_none() -> None:
    assert _on_ranks([None, None], [0.0, 0.0]) == [None, None]


def _runtimes(comm: ThreadComm) -> list[Runtime]:
    runtimes = []
    for rank in range(comm.env.world_size):
        runtime = Runtime(RuntimeConfig(), DistEnv())
        runtime.env = DistEnv(rank=rank, world_size=comm.env.world_size, launched=True)
        runtime.comm = comm  # type: ignore[assignment]
        runtimes.append(runtime)
    return runtimes


def _log(runtime: Runtime, value: Any) -> Any:
    """A script's helper that logs a value (called from two lines below)."""
    return runtime.global_loss(value)


def _ask(runtime: Runtime, shape: str, loss: Any, empty: bool) -> Any:
    """How the script asks for the loss's global value, at one step: ``one``
    line; a ``loop`` over two logged parts and the loss at one line; a
    ``helper`` called for a part and for the loss from two lines; ``if``/else
    (the value at one line, None at another). The results of every call."""
    part = None if empty else loss * 0.5
    if shape == "one":
        return [runtime.global_loss(None if empty else loss)]
    if shape == "loop":
        got = []
        for value in (part, part, None if empty else loss):
            got.append(runtime.global_loss(value))
        return got
    if shape == "helper":
        first = _log(runtime, part)
        return [first, _log(runtime, None if empty else loss)]
    if not empty:
        return [runtime.global_loss(loss)]
    else:
        return [runtime.global_loss(None)]


def _steps(
    world: int, none_at: list[int | None], shape: str = "one"
) -> tuple[list[list[Any]], int]:
    """Each step: every rank "backwards" its loss (what ``accel.backward`` does
    with it: recorded, its reduction started where the script asks for it),
    then asks ``global_loss`` of it as ``shape`` says (``_ask``), the rank
    ``none_at[step]`` with ``None`` and an empty share (fraction 0, the
    others' 1 / (world - 1)). The results by step and rank (an error raised
    where a rank raised; a rank that raised stops), and how many reductions
    were started."""
    comm = ThreadComm(world)
    runtimes = _runtimes(comm)
    results: list[list[Any]] = [[None] * world for _ in none_at]

    def rank(i: int) -> None:
        runtime = runtimes[i]
        for step, empty in enumerate(none_at):
            loss = torch.tensor(float(10 * step + i + 1))
            share = 1 / world if empty is None else 1 / (world - 1)
            runtime.record_losses([loss], 0.0 if empty == i else share)
            runtime.start_loss_reduce(loss)
            try:
                results[step][i] = _ask(runtime, shape, loss, empty == i)
            except RuntimeError as error:
                results[step][i] = error
                comm.abort()
                return

    # (daemons: a rank left waiting must not keep the test process alive)
    threads = [
        threading.Thread(target=rank, args=(i,), daemon=True) for i in range(world)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a rank waits in a collective the others skipped"
    return results, comm.started


def _expected(world: int, step: int, empty: int | None) -> float:
    """The global loss of the step: the mean over the ranks with a share."""
    ranks = [i for i in range(world) if i != empty]
    return sum(10 * step + i + 1 for i in ranks) / len(ranks)


@pytest.mark.parametrize("world", [2, 3])
def test_a_rank_with_none_takes_part_in_the_reduction_started_in_backward(
    world: int,
) -> None:
    """Once the script asks for the loss's global value every step, its
    reduction starts in backward on every rank; a rank with ``None`` at that
    line takes part in it (before r32b it started an all-reduce of its own,
    which met the others' next collective: a hang, or values mixed up). Its
    empty share counts nothing, as in the synchronous path of the first step
    (rev12: the value was the same only by chance of the shares)."""
    none_at: list[int | None] = [None, None, world - 1, None, 0]
    results, started = _steps(world, none_at)
    assert started == world * (len(none_at) - 1)  # every step after the first
    for step, row in enumerate(results):
        expected = _expected(world, step, none_at[step])
        assert [float(r[0]) for r in row] == pytest.approx([expected] * world), step


def test_a_rank_with_none_and_a_share_of_the_loss_is_refused_not_counted() -> None:
    """rev12: a rank that backpropagated a loss holding a share of the batch,
    then asked for the global value with None, got a value that counted its
    loss in the overlapped path and not in the synchronous one. The ranks
    would need another collective to agree: refused, on that rank."""
    comm = ThreadComm(2)
    runtimes = _runtimes(comm)
    results: list[Any] = [[], []]

    def rank(i: int) -> None:
        runtime = runtimes[i]
        for step in range(2):
            loss = torch.tensor(float(i + 1))
            runtime.record_losses([loss], 0.5)
            runtime.start_loss_reduce(loss)
            try:
                results[i].append(
                    runtime.global_loss(None if (step, i) == (1, 1) else loss)
                )
            except RuntimeError as error:
                results[i].append(error)

    threads = [threading.Thread(target=rank, args=(i,), daemon=True) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()
    assert "holds a share of the global loss" in str(results[1][1])


@pytest.mark.parametrize("shape", ["loop", "helper"])
@pytest.mark.parametrize("world", [2, 3])
def test_a_rank_with_none_at_another_call_reduces_anew_as_the_others(
    world: int, shape: str
) -> None:
    """rev12: a rank with None took part in the overlapped reduction at any
    call of the line that asked for it: a loop over logged parts at one line,
    or a helper called from two lines, gave that rank the values shifted by
    one (silent). The site is every frame of the script's and the count of
    calls there since the backward: at the asking call the rank with None
    takes part in the overlapped reduction, at any other it reduces anew as
    the others do with their other value (a metric None on an empty share:
    tests/runtime/scripts/replaced_buffers.py). Every rank gets every call's
    value, none shifted."""
    none_at: list[int | None] = [None, None, None, world - 1, None]
    results, _ = _steps(world, none_at, shape)
    for step, empty in enumerate(none_at):
        loss = _expected(world, step, empty)
        for i, got in enumerate(results[step]):
            assert not isinstance(got, Exception), (step, i, got)
            assert float(got[-1]) == pytest.approx(loss), (step, i)
            for part in got[:-1]:  # the logged parts: half of each rank's loss
                assert float(part) == pytest.approx(loss * 0.5), (step, i)


@pytest.mark.parametrize("world", [2, 3])
def test_a_rank_with_none_at_the_first_ask_starts_the_overlap_with_the_others(
    world: int,
) -> None:
    """The ranks decide together whether the script asked for the loss (the
    facts say whether one rank's value was the backward's loss): a rank with
    None at the first ask starts the next reductions in backward as the others
    do (they would wait for it there otherwise)."""
    none_at: list[int | None] = [world - 1, None, None]
    results, started = _steps(world, none_at)
    assert started == world * 2
    # the first step: the mean over the ranks with a value
    first = sum(i + 1 for i in range(world - 1)) / (world - 1)
    assert [float(r[0]) for r in results[0]] == pytest.approx([first] * world)
