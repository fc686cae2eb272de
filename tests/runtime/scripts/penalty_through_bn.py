"""A gradient penalty through BatchNorm layers that normalise by the global batch
(run at world 2 by test_sync_batchnorm): the first-order step trains, then a
penalty's second backward raises GradientPenaltyBatchNormError on every process."""

import torch
import torch.nn as nn

import accel_migrate.runtime as accel

torch.manual_seed(0)
critic = accel.prepare_model(
    nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
)
optimizer = accel.prepare_optimizer(torch.optim.SGD(critic.parameters(), lr=0.1))
x = torch.randn(8, 4)[accel.rank() * 4 : accel.rank() * 4 + 4]
loss = critic(x).mean()
accel.backward(loss)  # first order: trains
optimizer.step()
accel.print("first-order step trained")
x = x.clone().requires_grad_(True)
out = critic(x)
(slope,) = torch.autograd.grad(out.sum(), x, create_graph=True)  # runs
penalty = (slope.norm(dim=1) - 1).pow(2).mean()
accel.backward(out.mean() + 10 * penalty)  # the second backward: refused
print("not reached")
