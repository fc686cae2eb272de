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


@dataclass
class Seeds:
    #: ``name(seed)`` for each seed this process set, in order.
    calls: list[str] = field(default_factory=list)

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
        calls = self.calls

        @functools.wraps(seed)
        def seeded(*args: Any, **kwargs: Any) -> Any:
            value = args[0] if args else kwargs.get("seed", kwargs.get("a"))
            calls.append(f"{name}({value!r})")
            return seed(*args, **kwargs)

        return seeded

    def apart(self) -> str | None:
        """Where the processes' seeds first differ, e.g. ``torch.manual_seed(1)
        on rank 0, torch.manual_seed(2) on rank 1``; None where they agree or
        there is one process. A collective where there are several."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return None
        if dist.get_world_size() < 2:
            return None
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, self.calls)
        if all(calls == every[0] for calls in every):
            return None
        width = max(len(calls) for calls in every)
        index = next(
            i
            for i in range(width)
            if len({calls[i] if i < len(calls) else None for calls in every}) > 1
        )
        shown = [
            f"{calls[index] if index < len(calls) else 'no such seed'} on rank {rank}"
            for rank, calls in enumerate(every)
        ]
        if len(shown) > 3:
            shown = [*shown[:2], f"... ({len(shown) - 3} more), {shown[-1]}"]
        return ", ".join(shown)
