"""The process's place in the job, read from the variables torchrun sets."""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Set by ``accel-migrate launch``: the folder where each rank leaves a mark once its
#: script has finished without an exception, before the process group is torn down.
DONE_DIR_VARIABLE = "ACCEL_MIGRATE_DONE_DIR"


class LaunchEnvironmentError(RuntimeError):
    """The torchrun variables are missing, inconsistent or not integers."""


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    #: Started by torchrun (``accel-migrate launch``), even with one process.
    launched: bool = False

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> DistEnv:
        environ = dict(os.environ) if environ is None else environ
        if "WORLD_SIZE" not in environ:
            return cls()

        def read(name: str, default: int) -> int:
            raw = environ.get(name)
            if raw is None:
                return default
            try:
                return int(raw)
            except ValueError:
                raise LaunchEnvironmentError(
                    f"{name}={raw!r} is not an integer"
                ) from None

        world = read("WORLD_SIZE", 1)
        rank = read("RANK", 0)
        local_rank = read("LOCAL_RANK", rank)
        local_world = read("LOCAL_WORLD_SIZE", world)
        if world < 1 or not 0 <= rank < world:
            raise LaunchEnvironmentError(f"RANK={rank} does not fit WORLD_SIZE={world}")
        if world > 1 and ("MASTER_ADDR" not in environ or "MASTER_PORT" not in environ):
            raise LaunchEnvironmentError(
                "WORLD_SIZE>1 but MASTER_ADDR/MASTER_PORT are not set; "
                "start the script with `accel-migrate launch` or torchrun"
            )
        return cls(rank, world, local_rank, local_world, launched=True)
