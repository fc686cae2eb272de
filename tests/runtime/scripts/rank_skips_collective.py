"""Rank 0 enters an all-reduce that rank 1 never reaches (a rank-dependent branch)."""

import time

import torch

import accel_migrate.runtime as accel

accel.device()
x = torch.ones(2)
accel.reduce(x)
if accel.rank() == 0:
    accel.reduce(x)
else:
    time.sleep(120)
