"""Under fp16, an inf in one gradient element at step 3 must skip exactly that step
on every rank. Prints, per step, whether the parameters changed."""

import torch
from torch import nn

import accel_migrate.runtime as accel

torch.manual_seed(0)
model = accel.prepare_model(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.1))
first = accel.unwrap(model)[0]
x = torch.randn(16, 4).to(accel.device())
y = torch.randn(16, 1).to(accel.device())


def poison(grad: torch.Tensor) -> torch.Tensor:
    grad = grad.clone()
    grad.view(-1)[0] = float("inf")
    return grad


for step in range(6):
    poisoned = step == 3 and accel.rank() == accel.world_size() - 1
    sharded = hasattr(first.weight, "to_local")
    # DDP: an inf made during backward on one rank reaches every rank through the
    # gradient average. FSDP: an inf in one rank's own shard reaches no other rank,
    # so skipping the step needs the ranks to agree.
    handle = first.weight.register_hook(poison) if poisoned and not sharded else None
    optimizer.zero_grad()
    out = model(x)
    loss = nn.functional.mse_loss(out, y)
    accel.backward(loss)
    if handle is not None:
        handle.remove()
    if poisoned and sharded:
        first.weight.grad.to_local().view(-1)[0] = float("inf")
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.step()
    changed = any(
        not torch.equal(b, p.detach())
        for b, p in zip(before, model.parameters(), strict=True)
    )
    print(
        f"rank {accel.rank()} step {step} changed {changed} dtype {out.dtype}",
        flush=True,
    )
