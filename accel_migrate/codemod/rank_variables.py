"""The environment variables a launcher sets per process, without libcst: the
project view (``project_namespaces``, ``ast``) reads them on the cache-hit
path, where libcst is not imported (``rank_local_calls`` re-exports them)."""

from __future__ import annotations

#: Environment variables a launcher sets differently for each process (torchrun,
#: SLURM, Open MPI, MPICH/Intel MPI). A script written for one GPU sometimes
#: reads one already (``if os.environ.get("RANK", "0") == "0":``), and under the
#: migrated script's launcher it really differs between processes.
RANK_VARIABLES = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "PMI_RANK",
    }
)
