"""What the values accumulated over a sharded loader are, for AM009 (metric-sums).

- ``kinds``: is a per-batch value a sum (counts, sum-reduced losses) or a batch
  mean, read through variables, the returns of this file's functions and the
  ``forward`` of its model classes;
- ``forms``: how a batch mean that is a Python number depends on this process's
  batch (linearly, through a non-linear function, through a function of this
  file), which decides whether it can be combined from the processes' values;
- ``accumulators``: where a loop accumulates: ``x += ...`` on a variable zeroed
  before it, and values collected into an object made before it.
"""
