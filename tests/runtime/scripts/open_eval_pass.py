"""Reptile's evaluation between steps (gabrielhuang/reptile-pytorch): one batch
taken with next() of an endless generator over a sharded test loader, whose
pass stays open; its global batch of 3 rows splits 2/1 at two processes, the
training loader's of 4 rows 2/2. The runtime cannot tell from the order of the
passes which batches a loss is computed from (a batch first evaluated may be
read again: FixMatch's pseudo-labels from a no-grad or detached forward), so
the next backward is refused, as a loss computed from both batches is."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import accel_migrate.runtime as accel


def make_infinite(loader):
    while True:
        yield from loader


torch.manual_seed(0)
train = TensorDataset(torch.randn(8, 3), torch.randint(0, 2, (8,)))
test = TensorDataset(torch.randn(3, 3), torch.randint(0, 2, (3,)))
model = accel.prepare_model(nn.Linear(3, 2))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.5))
train_iter = make_infinite(accel.prepare_dataloader(DataLoader(train, batch_size=4)))
test_iter = make_infinite(accel.prepare_dataloader(DataLoader(test, batch_size=3)))
both = len(sys.argv) > 1 and sys.argv[1] == "both"
for step in range(4):
    x, y = next(train_iter)
    loss = nn.functional.cross_entropy(model(x), y)
    if both:  # the evaluation batch's loss added in: two shares in one mean
        tx, ty = next(test_iter)
        loss = loss + nn.functional.cross_entropy(model(tx), ty)
    optimizer.zero_grad()
    accel.backward(loss)
    optimizer.step()
    accel.print(f"step {step} loss {accel.global_loss(loss).item():.6f}")
    # evaluation: one batch of the test iterator, left open
    tx, ty = next(test_iter)
    accuracy = (model(tx).argmax(1) == ty).float().sum()
total = sum(float(p.detach().sum()) for p in accel.state_dict(model).values())
accel.print(f"params {total:.6f}")
