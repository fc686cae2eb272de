"""The first step refuses parameters of no prepared model (runtime.guards), in one
process with a stand-in runtime; tests/runtime/test_launch.py runs it for real."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime import guards
from accel_migrate.runtime._state import reset_runtime
from accel_migrate.runtime.comm import Collectives
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.module import PreparedModule
from tests import warm_python


class Critic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class PeerComm(Collectives):
    """Rank 0 of two, whose peer found ``peer_message`` (or nothing)."""

    def __init__(self, peer_message: str | None = None) -> None:
        super().__init__(DistEnv(0, 2, 0, 2, launched=True), torch.device("cpu"))
        self.peer_message = peer_message
        #: What the peer gathers before its message (its gradients' checksums).
        self.peer_objects: list[Any] = []
        self.calls: list[str] = []

    def all_reduce(self, tensor: torch.Tensor, op: Any = "sum") -> torch.Tensor:
        self.calls.append(f"all_reduce {op}")
        peer = 1.0 if self.peer_message else 0.0
        return torch.maximum(tensor, torch.tensor([peer]))

    def all_gather_object(self, obj: Any) -> list[Any]:
        self.calls.append("all_gather_object")
        if self.peer_objects:
            return [obj, self.peer_objects.pop(0)]
        return [obj, self.peer_message]


class Strategy:
    shards_parameters = False
    wraps_optimizer = False
    # no watch of late registrations (torch's global hooks): not what these check
    distributed = False

    def setup_module(self, module: nn.Module) -> nn.Module:
        return module

    def watch_forward(self, forward_module: nn.Module, output: Any) -> None:
        return None


class Precision:
    @staticmethod
    def forward_context() -> Any:
        return contextlib.nullcontext()


class GuardRuntime:
    """What guards reads of a Runtime: world 2, its prepared models, a comm."""

    def __init__(self, comm: PeerComm | None = None) -> None:
        self.env = DistEnv(0, 2, 0, 2, launched=True)
        self.comm = comm or PeerComm()
        self.strategy = Strategy()
        self.precision = Precision()
        self.backward_guarded = False
        self.empty_share_backward = False
        self.prepared: list[PreparedModule] = []

    def prepare(self, module: nn.Module) -> PreparedModule:
        prepared = PreparedModule(module, self)  # type: ignore[arg-type]
        self.prepared.append(prepared)
        return prepared

    def modules(self) -> list[PreparedModule]:
        return self.prepared

    def on_module_ready(self, module: PreparedModule) -> None:
        return None


def test_graph_parameters_are_the_parameter_leaves_only() -> None:
    critic = Critic()
    image = torch.randn(2, 3, requires_grad=True)  # a plain leaf: not a parameter
    frozen = nn.Linear(3, 3).requires_grad_(False)
    loss = critic(frozen(image)).sum()
    found = guards.graph_parameters(loss)
    assert {id(p) for p in found} == {id(p) for p in critic.parameters()}
    assert guards.graph_parameters(torch.tensor(1.0)) == []


def test_backward_through_an_unprepared_trained_model_is_refused() -> None:
    runtime = GuardRuntime()
    generator = runtime.prepare(nn.Linear(3, 3))
    critic = Critic()
    _optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)  # will update it
    loss = critic(generator(torch.randn(2, 3))).mean()
    with pytest.raises(guards.UnpreparedParametersError) as error:
        guards.check_backward(runtime, loss)  # type: ignore[arg-type]
    message = str(error.value)
    assert message.startswith(
        "accel.backward: the loss reaches parameters that belong to no prepared "
        "model, and an optimizer updates them: Critic (body.0.weight, body.0.bias, "
        "body.2.weight, body.2.bias)."
    )
    assert "Linear" not in message  # the prepared generator is not named
    assert "accel.prepare_model(...) where it is built" in message
    assert "2 processes" in message
    assert runtime.backward_guarded


def test_backward_of_prepared_models_only_passes_after_one_collective() -> None:
    runtime = GuardRuntime()
    generator = runtime.prepare(nn.Linear(3, 3))
    critic = runtime.prepare(Critic())
    _optimizer = torch.optim.SGD(
        [*generator.parameters(), *critic.parameters()], lr=0.1
    )
    loss = critic(generator(torch.randn(2, 3))).mean()
    guards.check_backward(runtime, loss)  # type: ignore[arg-type]
    assert runtime.comm.calls == ["all_reduce max"]


def test_an_unprepared_network_no_optimizer_holds_is_allowed() -> None:
    # A perceptual-loss network left trainable by mistake: its gradients are
    # computed but never applied, so every rank trains the same.
    runtime = GuardRuntime()
    generator = runtime.prepare(nn.Linear(3, 3))
    _optimizer = torch.optim.SGD(generator.parameters(), lr=0.1)
    perceptual = Critic()
    loss = perceptual(generator(torch.randn(2, 3))).mean()
    guards.check_backward(runtime, loss)  # type: ignore[arg-type]


def test_a_loose_trained_parameter_is_named_by_its_shape() -> None:
    runtime = GuardRuntime()
    model = runtime.prepare(nn.Linear(3, 1))
    temperature = nn.Parameter(torch.ones(1))
    _optimizer = torch.optim.Adam([*model.parameters(), temperature])
    loss = (model(torch.randn(2, 3)) * temperature).mean()
    with pytest.raises(
        guards.UnpreparedParametersError,
        match=r"1 nn.Parameter\(s\) of no module, shape \(1,\)",
    ):
        guards.check_backward(runtime, loss)  # type: ignore[arg-type]


def test_a_rank_that_found_nothing_raises_its_peers_message() -> None:
    # Otherwise it would go on to the next collective and wait there for a peer
    # that has stopped.
    runtime = GuardRuntime(PeerComm("the peer's message"))
    model = runtime.prepare(nn.Linear(3, 1))
    loss = model(torch.randn(2, 3)).mean()
    with pytest.raises(guards.UnpreparedParametersError, match=r"^the peer's message$"):
        guards.check_backward(runtime, loss)  # type: ignore[arg-type]


def test_a_prepared_optimizer_over_an_unprepared_model_fails_at_its_first_step() -> (
    None
):
    runtime = GuardRuntime()
    critic = Critic()
    optimizer = torch.optim.SGD(critic.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    critic(torch.randn(2, 3)).mean().backward()  # a backward the codemod missed
    before = [p.detach().clone() for p in critic.parameters()]
    with pytest.raises(guards.UnpreparedParametersError) as error:
        optimizer.step()
    assert str(error.value).startswith(
        "SGD.step(): this prepared optimizer updates parameters that belong to no "
        "prepared model: Critic (body.0.weight, body.0.bias, body.2.weight, body.2.bias)."
    )
    assert all(
        torch.equal(b, p) for b, p in zip(before, critic.parameters(), strict=True)
    )


def test_the_step_check_runs_once_and_then_costs_nothing() -> None:
    runtime = GuardRuntime()
    runtime.backward_guarded = True  # the backward below stands for accel.backward
    model = runtime.prepare(Critic())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    assert len(optimizer._optimizer_step_pre_hooks) == 1
    for step in range(3):
        model(torch.randn(2, 3)).mean().backward()
        if step == 0:  # averaged: the peer holds the same gradients
            runtime.comm.peer_objects = [_checksums(model.parameters())]
        optimizer.step()
    assert optimizer._optimizer_step_pre_hooks == {}
    assert runtime.comm.calls == [
        "all_reduce max",
        "all_reduce max",
        "all_gather_object",
    ]


def test_parameters_without_gradients_are_not_updated_so_not_refused() -> None:
    runtime = GuardRuntime()
    runtime.backward_guarded = True  # the backward below stands for accel.backward
    model = runtime.prepare(nn.Linear(3, 1))
    head = nn.Linear(1, 1)  # in the optimizer, unused this step
    optimizer = torch.optim.SGD([*model.parameters(), *head.parameters()], lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    model(torch.randn(2, 3)).mean().backward()
    runtime.comm.peer_objects = [_checksums(model.parameters())]
    optimizer.step()


def _checksums(params: Any) -> list[tuple[float, float]]:
    """What a peer whose gradients equal these gathers (``guards._unsynced``)."""
    return [
        (float(p.grad.double().sum()), float(p.grad.double().square().sum()))
        for p in params
    ]


def test_a_gradient_added_after_accel_backward_is_refused() -> None:
    """An accel.backward ran (its gradients are averaged), then a gradient of
    the process's share taken by torch.autograd.grad was added into p.grad:
    the peer's differ, and the first step stops."""
    runtime = GuardRuntime()
    runtime.backward_guarded = True  # the backward below stands for accel.backward
    model = runtime.prepare(Critic())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    x = torch.randn(2, 3)
    model(x).mean().backward()
    averaged = _checksums(model.parameters())
    params = list(model.parameters())
    extra = torch.autograd.grad(model(x).pow(2).mean(), params)
    for p, e in zip(params, extra, strict=True):
        p.grad += e
    runtime.comm.peer_objects = [averaged]  # the peer added its own share's
    with pytest.raises(guards.UnsyncedGradientsError, match=r"added into p\.grad"):
        optimizer.step()


def test_gradients_no_accel_backward_computed_are_refused() -> None:
    """PCGrad-style gradient surgery: torch.autograd.grad written into p.grad,
    with no accel.backward before the first step (no process averaged them);
    the world-2 run is fixtures/soundness/pcgrad_autograd_grad_r22.py."""
    runtime = GuardRuntime()
    model = runtime.prepare(Critic())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    params = list(model.parameters())
    grads = torch.autograd.grad(model(torch.randn(2, 3)).mean(), params)
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    # the peer's share gave other gradients
    runtime.comm.peer_objects = [[(1.0, 1.0)] * len(params)]
    with pytest.raises(guards.UnsyncedGradientsError, match="PCGrad") as caught:
        optimizer.step()
    assert "Critic (body.0.weight" in str(caught.value)


def test_a_plain_backward_through_the_prepared_model_is_not_refused() -> None:
    """``loss.backward()`` left as it was, through the prepared model's forward:
    the strategy's wrapper averaged the gradients, which are then equal on every
    process (here: the peer gathers the same checksums)."""
    runtime = GuardRuntime()
    model = runtime.prepare(Critic())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    model(torch.randn(2, 3)).mean().backward()
    mine = [
        (float(p.grad.double().sum()), float(p.grad.double().square().sum()))
        for p in model.parameters()
    ]
    runtime.comm.peer_objects = [mine]
    optimizer.step()
    assert runtime.comm.calls.count("all_gather_object") == 1


class SparseBag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 4, sparse=True)
        self.head = nn.Linear(4, 1)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.head(self.bag(ids, offsets))


def test_sparse_gradients_are_checked_by_their_values() -> None:
    """An EmbeddingBag(sparse=True)'s gradient is a sparse tensor, which has no
    ``ne``: the check reads its values (torch's NotImplementedError for
    'aten::ne.Scalar' on SparseCPU at the first step before; the world-2 run is
    fixtures/soundness/textcls_rebound_loss_r22t.py)."""
    runtime = GuardRuntime()
    runtime.backward_guarded = True
    model = runtime.prepare(SparseBag())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    model(torch.tensor([1, 2, 4, 5]), torch.tensor([0, 2])).mean().backward()
    assert model.bag.weight.grad is not None and model.bag.weight.grad.is_sparse
    mine = [
        (
            float(g.double().sum()),
            float(g.double().square().sum()),
        )
        for g in (
            p.grad.coalesce().values() if p.grad.is_sparse else p.grad
            for p in model.parameters()
        )
    ]
    runtime.comm.peer_objects = [mine]  # the peer's equal: averaged
    optimizer.step()
    runtime = GuardRuntime()
    runtime.backward_guarded = True
    model = runtime.prepare(SparseBag())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    model(torch.tensor([1, 2, 4, 5]), torch.tensor([0, 2])).mean().backward()
    runtime.comm.peer_objects = [[(1.0, 1.0)] * 3]  # the peer's differ
    with pytest.raises(guards.UnsyncedGradientsError):
        optimizer.step()


def test_zeroed_gradients_before_a_closure_are_not_refused() -> None:
    """LBFGS's first step(closure): the pre-step check runs before the closure's
    accel.backward, when the gradients are None or zeroed."""
    runtime = GuardRuntime()
    model = runtime.prepare(Critic())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guards.guard_first_step(runtime, optimizer)  # type: ignore[arg-type]
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    assert runtime.comm.calls == ["all_reduce max", "all_reduce max"]


def test_a_world_of_one_never_walks_the_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("guards ran in a world of one")

    monkeypatch.setattr(guards, "check_backward", refuse)
    monkeypatch.setattr(guards, "guard_first_step", refuse)
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    previous = reset_runtime(None)
    try:
        critic = Critic()  # not prepared: in one process that is the original script
        optimizer = accel.prepare_optimizer(
            torch.optim.SGD(critic.parameters(), lr=0.1)
        )
        accel.backward(critic(torch.randn(2, 3)).mean())
        optimizer.step()
    finally:
        reset_runtime(previous)


# -- for real: two processes ------------------------------------------------------------
SCRIPT = Path(__file__).parent / "scripts" / "unprepared_model.py"
LAUNCH = ["-m", "accel_migrate", "launch", "--nproc", "2"]


def _launch(mode: str, strategy: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [warm_python.executable(), *LAUNCH, "--strategy", strategy, str(SCRIPT), mode],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(
            180
        ),  # a rank left waiting in a collective would hang until this
        check=False,
    )


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("mode", "strategy", "message"),
    [
        ("unprepared", "ddp", "accel.backward: the loss reaches parameters"),
        ("gan", "fsdp", "accel.backward: the loss reaches parameters"),
        ("plain_backward", "ddp", "SGD.step(): this prepared optimizer updates"),
    ],
)
def test_an_unprepared_model_fails_loudly_on_every_rank(
    mode: str, strategy: str, message: str
) -> None:
    done = _launch(mode, strategy)
    assert done.returncode == 1, done.stderr
    for rank in (0, 1):
        assert (
            f"[rank{rank}]: accel_migrate.runtime.guards.UnpreparedParametersError: {message}"
            in done.stderr
        ), done.stderr
    assert "Classifier (body.0.weight" in done.stderr
    assert "step 0" not in done.stdout, "it stopped at the first step"


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("mode", "strategy"), [("prepared", "fsdp"), ("perceptual", "ddp")]
)
def test_prepared_models_train(mode: str, strategy: str) -> None:
    done = _launch(mode, strategy)
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout
    assert "UnpreparedParametersError" not in done.stderr


HAND_GRADS = Path(__file__).parent / "scripts" / "grads_by_hand.py"


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("mode", "refused"), [("after_backward", True), ("parameter_penalty", False)]
)
def test_a_gradient_added_by_hand_after_accel_backward(
    mode: str, refused: bool
) -> None:
    """AM040 can miss a ``torch.autograd.grad`` over the parameters (of another
    module, or spelled otherwise): after ``accel.backward(loss)`` averaged the
    loss's gradients, a batch-dependent gradient added into ``p.grad`` by hand
    differs between the processes, and the first step stops on every rank. A
    penalty of the parameters alone is the same everywhere: it trains."""
    done = subprocess.run(
        [warm_python.executable(), *LAUNCH, str(HAND_GRADS), mode],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    if not refused:
        assert done.returncode == 0, done.stderr
        assert "trained" in done.stdout
        return
    assert done.returncode == 1, done.stderr
    for rank in (0, 1):
        assert (
            f"[rank{rank}]: accel_migrate.runtime.guards.UnsyncedGradientsError: "
            "SGD.step(): the gradients of Sequential (0.weight" in done.stderr
        ), done.stderr
    assert "step 0" not in done.stdout, "it stopped at the first step"
