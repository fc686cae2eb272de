"""Stand-ins to exercise the runtime's per-rank logic in one process."""

from __future__ import annotations

from typing import Any

import torch

from accel_migrate.runtime.comm import Collectives
from accel_migrate.runtime.config import RuntimeConfig
from accel_migrate.runtime.env import DistEnv


class RecordedComm(Collectives):
    """Rank r of a simulated world: broadcasts return what rank 0 published."""

    def __init__(self, env: DistEnv, published: dict[str, Any]) -> None:
        super().__init__(env, torch.device("cpu"))
        self.published = published

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        key = (
            f"broadcast{self.published.setdefault('_count', {}).get(self.env.rank, 0)}"
        )
        counts = self.published["_count"]
        counts[self.env.rank] = counts.get(self.env.rank, 0) + 1
        if self.env.rank == src:
            self.published[key] = obj
        return self.published[key]

    def all_gather_object(self, obj: Any) -> list[Any]:
        # Every simulated rank agrees unless a test publishes disagreement.
        return self.published.get("gathered", [obj] * self.env.world_size)


class FakeRuntime:
    """Just what runtime.data needs from a Runtime."""

    def __init__(
        self,
        rank: int,
        world: int,
        published: dict[str, Any],
        batch_mode: str = "global",
    ) -> None:
        self.env = DistEnv(
            rank=rank, world_size=world, local_rank=rank, local_world_size=world
        )
        self.comm = RecordedComm(self.env, published)
        self.config = RuntimeConfig(batch_mode=batch_mode)  # type: ignore[arg-type]
        self.shares: list[tuple[int, int]] = []
        #: The passes over a sharded loader that are open (yielded, not ended).
        self.open_passes: set[int] = set()
        #: The first batches' comparison of the prepared models (drift.py):
        #: no model here, nothing to compare.
        self.drift_check = None

    def set_batch_share(
        self, local: int, total: int, source: int | None = None
    ) -> None:
        self.shares.append((local, total))
        if source is not None:
            self.open_passes.add(source)

    def end_batch_shares(self, source: int) -> None:
        self.open_passes.discard(source)
