"""accel.reduce of numpy values at two processes: a numpy int64 count (the
torchdiffeq accuracy()'s ``total_correct += np.sum(pred == target)``), a
float32 sum, an int array and the mean of an int. Prints what rank 0 gets."""

import numpy as np

import accel_migrate.runtime as accel

rank = accel.rank()
count = accel.reduce(np.sum(np.array([1, 0, 1]) == np.array([1, 1, rank])))
total = accel.reduce(np.float32(0.5 + rank))
array = accel.reduce(np.array([rank, 1, 2], dtype=np.int64))
mean = accel.reduce(np.int64(2 + 2 * rank), op="mean")
accel.print(
    "count",
    type(count).__name__,
    int(count),
    "total",
    type(total).__name__,
    float(total),
    "array",
    array.dtype,
    array.tolist(),
    "mean",
    mean,
)
half = accel.reduce(np.array([1.0, 2.0 + rank], dtype=np.float32), op="mean")
small = accel.reduce(np.array([200, rank], dtype=np.uint8))
scalar_mean = accel.reduce(np.float32(1.0 + 2 * rank), op="mean")
wide = accel.reduce(np.int32(2**31 - 1))
accel.print(
    "half",
    half.dtype,
    half.tolist(),
    "small",
    small.dtype,
    small.tolist(),
    "scalar_mean",
    type(scalar_mean).__name__,
    float(scalar_mean),
    "wide",
    type(wide).__name__,
    int(wide),
)
try:
    accel.reduce(np.bool_(True))
except TypeError as error:
    accel.print("refused", error)
