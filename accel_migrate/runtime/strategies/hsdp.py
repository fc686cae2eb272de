"""Hybrid sharded data parallel (HSDP): FSDP2 within a node, replication across nodes.

``fully_shard`` over a 2-D device mesh of shape (nodes, processes per node), dims
("replicate", "shard"): each parameter is sharded across the processes of one
node (fast intra-node links carry the all-gathers and reduce-scatters) and
replicated across nodes (only the gradient all-reduce crosses the network).
Memory per rank is that of FSDP with ``LOCAL_WORLD_SIZE`` processes.

Everything else is the FSDP strategy's: units per block, full state dicts with
the original keys, optimizer remapping, mixed precision, clipping, sharded
``save_state``. Only the mesh differs.

The shape comes from what torchrun sets: ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE``;
torchrun numbers ranks node by node, so a row of the mesh is one node. Refused,
in one line, before any process group is made:
- a world that is not a whole number of equal nodes;
- one node: HSDP there is plain FSDP, and asking for it on one node is more often
  a missing ``--nnodes`` than a wish; the message says to use ``--strategy fsdp``.
"""

from __future__ import annotations

from typing import Any

from ..config import ConfigError, RuntimeConfig
from ..env import DistEnv
from .fsdp import FSDPStrategy

MESH_DIMS = ("replicate", "shard")


def mesh_shape(env: DistEnv) -> tuple[int, int]:
    """(nodes, processes per node) of the job."""
    return env.world_size // env.local_world_size, env.local_world_size


class HSDPStrategy(FSDPStrategy):
    name = "hsdp"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mesh: Any | None = None

    @classmethod
    def check(cls, env: DistEnv, config: RuntimeConfig) -> None:
        asked = f"strategy 'hsdp' (from {config.source_of('strategy')})"
        world, local = env.world_size, env.local_world_size
        if local < 1 or world % local:
            raise ConfigError(
                f"{asked} needs nodes of equal size: WORLD_SIZE={world} is not a "
                f"multiple of LOCAL_WORLD_SIZE={local}"
            )
        if world == local:
            raise ConfigError(
                f"{asked} replicates across nodes, but this job is one node of "
                f"{world} process(es); on one node HSDP is plain FSDP: use "
                "--strategy fsdp (or launch with --nnodes 2 or more)"
            )

    def device_mesh(self) -> Any:
        if self._mesh is None:
            # Made once, by every rank together (it creates process groups), at
            # the first prepared model's first forward.
            from torch.distributed.device_mesh import init_device_mesh

            self._mesh = init_device_mesh(
                self.device.type, mesh_shape(self.env), mesh_dim_names=MESH_DIMS
            )
        return self._mesh
