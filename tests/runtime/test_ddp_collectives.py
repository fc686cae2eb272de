"""``strategies/ddp_collectives``: what the DDP strategy exchanges itself, in a
process group of one (gloo): one all-reduce per dtype for an averaged backward,
no gradient made for a parameter that has none, a sparse one refused; the
exported errors a script catches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime import comm
from accel_migrate.runtime._state import LossSiteError
from accel_migrate.runtime.module import LateRegistrationError
from accel_migrate.runtime.strategies import ddp_collectives


@pytest.fixture
def group(tmp_path: Path) -> Iterator[None]:
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    all_reduce = dist.all_reduce

    def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        calls.append(tensor.dtype)
        return all_reduce(tensor, *args, **kwargs)

    monkeypatch.setattr(ddp_collectives.dist, "all_reduce", counted)
    return calls


def test_one_all_reduce_per_dtype(group: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # before r33b: one more, of which parameters had a gradient
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    model[0].weight.grad = torch.full_like(model[0].weight, 2.0)
    model[1].bias.grad = torch.ones_like(model[1].bias)
    calls = _counted(monkeypatch)
    ddp_collectives.average_gradients(model, torch.device("cpu"))
    assert calls == [torch.float32]
    assert torch.equal(model[0].weight.grad, torch.full_like(model[0].weight, 2.0))
    assert torch.equal(model[1].bias.grad, torch.ones_like(model[1].bias))
    # a parameter with no gradient on any rank keeps none, as in the original
    assert model[0].bias.grad is None and model[1].weight.grad is None

    mixed = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1).double())
    mixed[1].bias.grad = torch.ones_like(mixed[1].bias)
    calls.clear()
    ddp_collectives.average_gradients(mixed, torch.device("cpu"))
    assert calls == [torch.float32, torch.float64]
    assert torch.equal(mixed[1].bias.grad, torch.ones_like(mixed[1].bias))
    assert mixed[0].weight.grad is None


def test_a_sparse_gradient_is_refused(group: None) -> None:
    embedding = nn.Embedding(4, 2, sparse=True)
    embedding(torch.tensor([1])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse gradients"):
        ddp_collectives.average_gradients(embedding, torch.device("cpu"))


def test_the_errors_a_script_catches_are_exported() -> None:
    # before r33b neither was exported from accel_migrate.runtime
    assert accel.LossSiteError is LossSiteError
    assert accel.LateRegistrationError is LateRegistrationError
    assert {"LossSiteError", "LateRegistrationError"} <= set(accel.__all__)


class _Scale(nn.Module):
    """A buffer the forward updates from its input, saved for the backward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("s", torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.s.mul_(0.5).add_(0.5 * x.detach().abs().mean(0))
        return x * self.s


def _faked(monkeypatch: pytest.MonkeyPatch, value: float) -> list[int]:
    """``_broadcast_coalesced`` writing ``value`` (rank 0's, at world 1)."""
    sent: list[int] = []

    def fake(group: Any, tensors: list[torch.Tensor], *args: Any) -> None:
        sent.append(len(tensors))
        for tensor in tensors:
            tensor.fill_(value)

    monkeypatch.setattr(ddp_collectives.dist, "_broadcast_coalesced", fake)
    return sent


def test_a_retained_graph_keeps_the_buffers_it_saved(
    group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before fixn the buffers were written in place after the first backward
    # of `backward(l1, retain_graph=True); backward(l2)` (the version counter
    # kept, so no error): the second backward read rank 0's (here 7.0)
    torch.manual_seed(0)
    wrapper = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(2, 2), _Scale())
    )
    x = torch.randn(4, 2)
    out = wrapper(x)
    saved = wrapper.module[1].s.clone()
    out.sum().backward(retain_graph=True)
    sent = _faked(monkeypatch, 7.0)
    ddp_collectives.broadcast_own_buffers(wrapper, retained=True)
    assert sent == [1]
    # the module holds rank 0's value, in a new tensor
    assert torch.equal(wrapper.module[1].s, torch.full((2,), 7.0))
    first = wrapper.module[0].weight.grad.clone()
    wrapper.module.zero_grad()
    out.sum().backward()  # the second backward: the saved value, as the first
    assert torch.allclose(wrapper.module[0].weight.grad, first)
    assert not torch.equal(saved, torch.full((2,), 7.0))
    # a backward that freed its graph: written in place
    held = wrapper.module[1].s
    wrapper(x).sum().backward()
    _faked(monkeypatch, 3.0)
    ddp_collectives.broadcast_own_buffers(wrapper, retained=False)
    assert wrapper.module[1].s is held and torch.equal(held, torch.full((2,), 3.0))


def test_only_a_buffer_that_differs_is_rebound(
    group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # r34d: a buffer whose value is rank 0's already stays the tensor the
    # script may hold (before, every one was rebound after a retained graph)
    torch.manual_seed(0)
    wrapper = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(2, 2), _Scale())
    )
    wrapper(torch.randn(4, 2)).sum().backward(retain_graph=True)
    held = wrapper.module[1].s
    value = held.clone()
    monkeypatch.setattr(ddp_collectives.dist, "_broadcast_coalesced", _unchanged)
    ddp_collectives.broadcast_own_buffers(wrapper, retained=True)
    assert wrapper.module[1].s is held and torch.equal(held, value)


def _unchanged(group: Any, tensors: list[torch.Tensor], *args: Any) -> None:
    """``_broadcast_coalesced`` where rank 0's values are this process's."""


def test_among_several_buffers_only_the_differing_ones_are_rebound(
    group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # fixp: the buffers compared at once (one stacked answer), not one
    # `torch.equal` each; a buffer of another dtype, and an empty one, too
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 2), _Scale(), _Scale())
    model[2].register_buffer("n", torch.arange(3))
    model[2].register_buffer("e", torch.empty(0))
    wrapper = nn.parallel.DistributedDataParallel(model)
    wrapper(torch.randn(4, 2)).sum().backward(retain_graph=True)
    kept = {
        "s": model[1].s,
        "n": model[2].n,
        "e": model[2].e,
    }
    differs = model[2].s

    def first_s_differs(group: Any, tensors: list[torch.Tensor], *args: Any) -> None:
        for tensor in tensors:
            if tensor.shape == (2,) and torch.equal(tensor, differs):
                tensor.fill_(7.0)

    monkeypatch.setattr(ddp_collectives.dist, "_broadcast_coalesced", first_s_differs)
    ddp_collectives.broadcast_own_buffers(wrapper, retained=True)
    assert model[1].s is kept["s"] and model[2].n is kept["n"]
    assert model[2].e is kept["e"]
    assert model[2].s is not differs
    assert torch.equal(model[2].s, torch.full((2,), 7.0))


def test_a_compiled_module_reads_a_rebound_buffer(
    group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a guard: a buffer rebound after a retained graph (rank 0's value in a
    # new tensor) is the one the compiled module reads next, without
    # recompiling (torch 2.13 takes a module's buffers as the graph's inputs;
    # it passed before r34d's change too, which rebinds fewer)
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(0)
    wrapper = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(2, 2), _Scale())
    )
    compiled = torch.compile(wrapper.module, backend="aot_eager")
    x = torch.randn(4, 2)
    try:
        out = compiled(x)
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"torch.compile does not run on this machine: {exc}")
    try:
        out.sum().backward(retain_graph=True)
        _faked(monkeypatch, 7.0)
        ddp_collectives.broadcast_own_buffers(wrapper, retained=True)
        rebound = wrapper.module[1].s
        assert torch.equal(rebound, torch.full((2,), 7.0))
        monkeypatch.setattr(torch._dynamo.config, "error_on_recompile", True)
        got = compiled(x)  # (raises where it recompiles)
        hidden = wrapper.module[0](x).detach()
        scale = 0.5 * 7.0 + 0.5 * hidden.abs().mean(0)
        assert wrapper.module[1].s is rebound  # updated in place, as eager does
        assert torch.allclose(rebound, scale)
        assert torch.allclose(got, hidden * scale)
    finally:
        torch._dynamo.reset()


def test_own_buffers_are_found_once_per_wrapper(
    group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before fixn every backward walked the model's modules (1.41 ms for 212)
    # and broadcast an empty list's worth of work
    plain = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    )
    wrapper = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(2, 2), _Scale())
    )
    sent = _faked(monkeypatch, 1.0)
    ddp_collectives.broadcast_own_buffers(plain, retained=False)
    assert sent == []  # BatchNorm's statistics are DDP's; nothing else
    walks: list[int] = []
    named_modules = nn.Module.named_modules

    def counted(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        if self is wrapper.module:  # (not its recursion into the parts)
            walks.append(1)
        return named_modules(self, *args, **kwargs)

    monkeypatch.setattr(nn.Module, "named_modules", counted)
    for _ in range(3):
        ddp_collectives.broadcast_own_buffers(wrapper, retained=False)
    assert sent == [1, 1, 1] and len(walks) == 1
    # a buffer replaced by assignment is the one broadcast
    wrapper.module[1].s = torch.zeros(2)
    ddp_collectives.broadcast_own_buffers(wrapper, retained=False)
    assert torch.equal(wrapper.module[1].s, torch.ones(2))
    ddp_collectives.forget_own_buffers(wrapper)
    wrapper.parameters_to_ignore.add("1.s")
    ddp_collectives.broadcast_own_buffers(wrapper, retained=False)
    assert sent == [1, 1, 1, 1] and len(walks) == 2
    # a module taken in late (no rebuilt wrapper): every wrapper's found anew
    ddp_collectives.forget_own_buffers(None)
    assert wrapper not in ddp_collectives._OWN


def test_rank_0s_tensors_travel_contiguous(
    group: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before fixn `dist.broadcast(param.data)` sent a self-overlapping view as
    # it lay: gloo wrote past it at world 2 (heap corruption, SIGABRT)
    sent: list[torch.Tensor] = []

    def fake(tensor: torch.Tensor, src: int) -> None:
        sent.append(tensor)
        tensor.fill_(5.0)  # rank 0's value

    monkeypatch.setattr(comm.dist, "broadcast", fake)
    overlapping = nn.Parameter(torch.arange(4.0)[None].expand(3, 4).t(), False)
    transposed = nn.Parameter(torch.zeros(3, 4).t(), requires_grad=False)
    plain = torch.zeros(2)
    held = transposed.data
    comm.broadcast_from_rank0([overlapping, transposed, plain], torch.device("cpu"))
    assert all(t.is_contiguous() for t in sent)
    assert sent[2].data_ptr() == plain.data_ptr()  # sent as it lies
    # every one holds rank 0's value; the one that overlaps is its own now,
    # the others were written in place
    for tensor in (overlapping, transposed, plain):
        assert torch.equal(tensor, torch.full_like(tensor, 5.0))
    assert torch._debug_has_internal_overlap(overlapping.data) == 0
    assert transposed.data_ptr() == held.data_ptr()
