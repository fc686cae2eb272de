"""The seeds each process of a run sets, for ``compare``'s diagnosis.

A script that seeds with its rank (``torch.manual_seed(seed + rank)``, the rank
read from ``RANK`` or ``dist.get_rank()``) runs as the original on rank 0 and
draws other numbers on every other rank. The runtime makes the initial weights
rank 0's and draws the data order under rank 0's random state, so neither shows
it; what differs is every draw the script makes itself (a noise tensor, a random
bias, an augmentation), from the first step on. The runner records the seeds
each process sets (``Seeds.install``), and the migrated run compares them across
its processes (``Seeds.apart``, one gather at the end of the run), so the verdict
can name the seed instead of guessing at the data order.
"""

from __future__ import annotations

import functools
import importlib.util
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

#: At most this many calls of one seeding function per process, in all: a script
#: seeds once at its start (or a few times: per library, per phase). One that
#: calls it per sample or per step (``random.seed(i)`` in ``__getitem__``) is
#: reseeding for its own reasons, and which process drew which sample explains
#: the values, not a seed offset by the rank.
FEW = 3


@dataclass
class Seeds:
    #: ``(function, repr(seed), training steps completed)`` for each seed this
    #: process set, in order.
    calls: list[tuple[str, str, int]] = field(default_factory=list)
    #: The training steps completed so far (the runner's count).
    step: Callable[[], int] = lambda: 0

    def install(self) -> None:
        """Record the seeds set through torch's, Python's and NumPy's global
        seeding functions (each still seeds as before)."""
        torch.manual_seed = self._recording("torch.manual_seed", torch.manual_seed)
        torch.random.manual_seed = torch.manual_seed
        random.seed = self._recording("random.seed", random.seed)
        if importlib.util.find_spec("numpy") is not None:
            import numpy

            numpy.random.seed = self._recording("numpy.random.seed", numpy.random.seed)

    def _recording(self, name: str, seed: Callable[..., Any]) -> Callable[..., Any]:
        calls, step = self.calls, self.step

        @functools.wraps(seed)
        def seeded(*args: Any, **kwargs: Any) -> Any:
            value = args[0] if args else kwargs.get("seed", kwargs.get("a"))
            calls.append((name, repr(value), step()))
            return seed(*args, **kwargs)

        return seeded

    def apart(self) -> str | None:
        """Where the processes' seeds differ (``seeds_apart``); None where they
        agree or there is one process. A collective where there are several."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return None
        if dist.get_world_size() < 2:
            return None
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, self.calls)
        return seeds_apart(every)


def seeds_apart(every: list[list[tuple[str, str, int]]]) -> str | None:
    """The first seed that differs between the processes (``every[rank]``: that
    process's ``Seeds.calls``), e.g. ``torch.manual_seed(1) on rank 0,
    torch.manual_seed(2) on rank 1``. Only a seeding function that every process
    called the same number of times, at most ``FEW`` times in all and each
    before the first training step completed, as a script seeds at its start: a
    seed called per sample, per step, or on some processes only (``if
    accel.is_main_process(): torch.manual_seed(123)``) names no seed."""
    found: list[tuple[int, int, list[list[tuple[str, str, int]]]]] = []
    for name in sorted({name for calls in every for name, _, _ in calls}):
        per_rank = [[c for c in calls if c[0] == name] for calls in every]
        count = len(per_rank[0])
        if not 1 <= count <= FEW or any(len(c) != count for c in per_rank):
            continue
        if any(step != 0 for calls in per_rank for _, _, step in calls):
            continue
        for index in range(count):
            if len({calls[index][1] for calls in per_rank}) > 1:
                # (where it stands among rank 0's seeds: the first one apart)
                position = every[0].index(per_rank[0][index])
                found.append((position, index, per_rank))
                break
    if not found:
        return None
    _, index, per_rank = min(found, key=lambda f: f[0])
    shown = [
        f"{calls[index][0]}({calls[index][1]}) on rank {rank}"
        for rank, calls in enumerate(per_rank)
    ]
    if len(shown) > 3:
        shown = [*shown[:2], f"... ({len(shown) - 3} more), {shown[-1]}"]
    return ", ".join(shown)
