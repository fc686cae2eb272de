"""The launcher's options as torchrun takes them: checked before anything starts.

torchrun's own argparse would otherwise be the first to see a bad value and
answer with a traceback (``--max-restarts -1``) or with its usage as if it were
ours; and it would read a script's own options that abbreviate one of its own
(``--log`` for ``--log-dir``). So the launcher checks every value here, and the
script's arguments never reach torchrun's parser (see ``launch_command``).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from ..runtime.config import ConfigError, RuntimeConfig

#: The launcher's option spellings, for "did you mean".
KNOWN_OPTIONS = (
    "--nproc",
    "--nproc-per-node",
    "--nproc_per_node",
    "--strategy",
    "--precision",
    "--batch-mode",
    "--no-sync-batchnorm",
    "--fsdp-wrap",
    "--fsdp-block-classes",
    "--fsdp-min-params",
    "--no-reshard-after-forward",
    "--fsdp-cpu-offload",
    "--activation-checkpointing",
    "--zero-stage",
    "--deepspeed-config",
    "--nnodes",
    "--node-rank",
    "--node_rank",
    "--rdzv-endpoint",
    "--rdzv_endpoint",
    "--rdzv-id",
    "--rdzv_id",
    "--rdzv-backend",
    "--rdzv_backend",
    "--rdzv-conf",
    "--rdzv_conf",
    "--master-addr",
    "--master_addr",
    "--master-port",
    "--master_port",
    "--standalone",
    "--max-restarts",
    "--max_restarts",
    "--log-dir",
    "--log_dir",
    "--redirects",
    "--tee",
    "--local-ranks-filter",
    "--local_ranks_filter",
    "--module",
    "--timeout",
    "--help",
)
_STD = re.compile(r"^([0-3]|\d+:[0-3](,\d+:[0-3])*)$")
_NNODES = re.compile(r"^(\d+)(?::(\d+))?$")


def unknown_option(script: str) -> str | None:
    """An option the launcher does not know, given where the script should be."""
    if not script.startswith("-") or script == "-":
        return None
    name = script.split("=", 1)[0]
    close = difflib.get_close_matches(name, KNOWN_OPTIONS, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return (
        f"unknown option {name}{hint}; the launcher's options come before the "
        "script, the script's own after it (accel-migrate launch --help)"
    )


def node_range(nnodes: str) -> tuple[int, int]:
    match = _NNODES.match(nnodes)
    if match is None:
        raise ConfigError(f"--nnodes={nnodes!r} is not N or MIN:MAX")
    low = int(match.group(1))
    high = int(match.group(2) or low)
    if low < 1 or high < low:
        raise ConfigError(f"--nnodes={nnodes!r}: need 1 <= MIN <= MAX")
    return low, high


def check_options(options: dict[str, Any], processes: int) -> None:
    """Refuse values torchrun would refuse, or fail on, later."""
    low, high = node_range(options["nnodes"])
    if options["max_restarts"] < 0:
        raise ConfigError(f"--max-restarts {options['max_restarts']} must be 0 or more")
    node_rank = options["node_rank"]
    if node_rank is not None and not 0 <= node_rank < high:
        raise ConfigError(
            f"--node-rank {node_rank} does not fit --nnodes {options['nnodes']}"
            f" (0 to {high - 1})"
        )
    port = options.get("master_port")
    if port is not None and not 0 < port < 65536:
        raise ConfigError(f"--master-port {port} is not a port (1-65535)")
    if options.get("standalone") and high > 1:
        raise ConfigError(
            f"--standalone runs one node, but --nnodes {options['nnodes']} asks for more"
        )
    if options.get("master_addr") and options.get("rdzv_endpoint"):
        raise ConfigError(
            "--master-addr and --rdzv-endpoint are two kinds of rendezvous; give one"
        )
    conf = options.get("rdzv_conf")
    if conf and not all("=" in item for item in conf.split(",")):
        raise ConfigError(f"--rdzv-conf={conf!r} is not KEY=VALUE,KEY=VALUE")
    for name in ("redirects", "tee"):
        value = options.get(name)
        if value is not None and not _STD.match(value):
            raise ConfigError(
                f"--{name}={value!r} is not 0-3 (none, stdout, stderr, both) "
                "or LOCAL_RANK:N,..."
            )
    ranks = options.get("local_ranks_filter")
    if ranks is not None:
        try:
            chosen = [int(r) for r in ranks.split(",")]
        except ValueError:
            raise ConfigError(
                f"--local-ranks-filter={ranks!r} is not comma-separated ranks"
            ) from None
        outside = [r for r in chosen if not 0 <= r < processes]
        if outside:
            raise ConfigError(
                f"--local-ranks-filter: local rank {outside[0]} does not exist with "
                f"{processes} process(es) per node"
            )
        if options.get("tee") is None and options.get("redirects") is None:
            # torchrun only filters output it captures; without --tee the filter
            # would silently do nothing.
            options["tee"] = "3"
    if low > 1 or high > 1:
        if not options.get("rdzv_endpoint") and not options.get("master_addr"):
            raise ConfigError(
                f"--nnodes {options['nnodes']} needs --rdzv-endpoint HOST:PORT "
                "(or --master-addr and --master-port)"
            )


def extra_torchrun_arguments(options: dict[str, Any]) -> list[str]:
    """torchrun options passed through as the user gave them."""
    args: list[str] = []
    for name, flag in (
        ("rdzv_conf", "--rdzv-conf"),
        ("redirects", "--redirects"),
        ("tee", "--tee"),
        ("local_ranks_filter", "--local-ranks-filter"),
    ):
        if options.get(name) is not None:
            args += [flag, str(options[name])]
    return args


def module_file(module: str, folder: Path) -> Path | None:
    """The file ``python -m module`` would run from ``folder``, if it is there."""
    path = folder.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__main__.py"):
        if candidate.is_file():
            return candidate
    return None


def offload_note(config: RuntimeConfig, cuda: bool) -> str | None:
    """A line for ``fsdp-cpu-offload`` where it changes nothing: a strategy with
    no shards to offload, or no GPU (the shards are in host memory already)."""
    if not config.fsdp_cpu_offload:
        return None
    asked = f"note: fsdp-cpu-offload (from {config.source_of('fsdp_cpu_offload')})"
    if config.strategy not in ("fsdp", "hsdp", "deepspeed"):
        return (
            f"{asked} changes nothing under strategy {config.strategy!r}: it "
            "offloads the shards of fsdp, hsdp and deepspeed"
        )
    if cuda:
        return None
    return (
        f"{asked} changes nothing without a GPU: the shards and the optimizer "
        "state are in host memory already"
    )


_SOURCE_WORDS = {"COMMANDLINE": "flag", "ENVIRONMENT": "environment"}


def banner(
    config: RuntimeConfig,
    processes: int,
    options: dict[str, Any],
    sources: dict[str, str],
    cuda: bool,
    slurm: bool,
    cpu_only: bool = False,
) -> str:
    """One line: what the job is and where each part of it came from.
    ``cpu_only``: the script calls ``accel.device(accelerator=False)`` (the
    codemod writes it for a script with no device code), so its processes use
    gloo on the CPU whatever the machine has."""

    def came(name: str, env: str) -> str:
        where = sources.get(name, "DEFAULT")
        if where == "ENVIRONMENT":
            return env
        return _SOURCE_WORDS.get(where, "default")

    low, high = node_range(options["nnodes"])
    nodes = str(low) if low == high else f"{low}-{high}"
    world = (
        str(processes * low) if low == high else f"{processes * low}-{processes * high}"
    )
    node_source = "Slurm" if slurm else came("nnodes", "PET_NNODES")
    nproc_source = came("nproc", "PET_NPROC_PER_NODE")
    if options["nproc"] == "auto":
        if cuda and cpu_only:
            nproc_source += (
                ", auto: one, not one per GPU, as the script keeps every process "
                "on the CPU; --nproc N starts N"
            )
        else:
            nproc_source += ", auto: one per GPU" if cuda else ", auto: no GPU"
    strategy = config.strategy
    strategy_source = config.source_of("strategy")
    if strategy == "auto":
        strategy = "ddp" if processes * high > 1 else "single"
        strategy_source = f"auto, {strategy_source}"
    backend = "nccl" if cuda and not cpu_only else "gloo"
    found = "GPUs found" if cuda else "no GPU"
    if cuda and cpu_only:
        found = "GPUs found; the script keeps every process on the CPU"
    return (
        f"accel-migrate launch: world size {world} ({processes} per node, "
        f"{nproc_source}), nodes {nodes} ({node_source}), strategy {strategy} "
        f"({strategy_source}), precision {config.precision} "
        f"({config.source_of('precision')}), backend {backend} "
        f"({found}), batch mode {config.batch_mode} "
        f"({config.source_of('batch_mode')})"
    )


#: The module-level statement the codemod writes into a script with no device
#: code (``device_free``): a bare call at column 0, not an assignment. A GPU
#: script's ``device = accel.device(accelerator=False)`` in the CPU branch of
#: ``if torch.cuda.is_available():`` (``device_choice``) does not match.
_CPU_ONLY = re.compile(
    rb"^[A-Za-z_][\w.]*\.device\(\s*accelerator\s*=\s*False\s*\)[ \t]*(#[^\n]*)?$",
    re.MULTILINE,
)


def keeps_cpu(script: str | None) -> bool:
    """Does the script at ``script`` keep every process on the CPU, with the
    module-level statement ``accel.device(accelerator=False)``? (Read as text,
    never run; False where it cannot be read.)"""
    if script is None:
        return False
    try:
        with open(script, "rb") as handle:
            return _CPU_ONLY.search(handle.read(1 << 22)) is not None
    except OSError:
        return False
