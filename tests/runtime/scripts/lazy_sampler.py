"""An iteration-based trainer, minGPT-style: a sampler of 10**10 samples drawn with
replacement, left with ``break`` after ``max_iters``. Prints how long the first
batch took, each step's global batch and loss, and the peak memory growth.

argv: STATE_DIR [--resume]: saves the state at step 10; --resume continues from it.
"""

import resource
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

import accel_migrate.runtime as accel

state_dir = sys.argv[1]
torch.manual_seed(0)
data = TensorDataset(torch.arange(500), torch.randn(500, 4), torch.randn(500, 1))
sampler = RandomSampler(data, replacement=True, num_samples=int(1e10))
loader = accel.prepare_dataloader(DataLoader(data, batch_size=6, sampler=sampler))
model = accel.prepare_model(nn.Linear(4, 1))
optimizer = accel.prepare_optimizer(torch.optim.SGD(model.parameters(), lr=0.05))
resume = accel.load_state(state_dir) if "--resume" in sys.argv else None
step = resume.step if resume else 0

start = time.perf_counter()
memory = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for index, x, y in loader:
    if step == (resume.step if resume else 0):
        accel.print(f"first batch {time.perf_counter() - start:.3f}s")
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    accel.backward(loss)
    optimizer.step()
    accel.print(f"batch {step} {accel.gather(index).tolist()}")
    accel.print(f"step {step} loss {accel.global_loss(loss).item():.10e}")
    step += 1
    if step == 10 and resume is None:
        accel.save_state(state_dir)
    if step == 20:
        break
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - memory
accel.print(f"memory grew {grown} KiB")
