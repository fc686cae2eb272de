"""Rank 1 raises at step 3 while rank 0 waits in a collective."""

import time

import torch

import accel_migrate.runtime as accel

accel.device()
x = torch.ones(2)
for step in range(1000):
    if step == 3 and accel.rank() == 1:
        raise ValueError("bad batch on rank 1")
    accel.reduce(x)
    time.sleep(0.02)
