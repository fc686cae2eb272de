"""One process, one device: the script runs as the user wrote it."""

from __future__ import annotations

from ..config import ConfigError, RuntimeConfig
from ..env import DistEnv
from .base import Strategy


class SingleDeviceStrategy(Strategy):
    name = "single"
    distributed = False

    @classmethod
    def check(cls, env: DistEnv, config: RuntimeConfig) -> None:
        if env.world_size > 1:
            raise ConfigError(
                f"strategy 'single' (from {config.source_of('strategy')}) cannot run "
                f"{env.world_size} processes; use --strategy ddp, fsdp or auto"
            )
