"""``accel-migrate launch`` and ``verify``: the commands that run the script.

Their options are parsed here and handed to ``run_launch`` / ``run_verify``;
both need the environment's torch, checked first.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from .exit_codes import EXIT_USAGE


class StrategyChoice(click.Choice):
    """``--strategy``: ``auto`` and the runtime configuration's strategies
    (``runtime/config.py``'s ``STRATEGIES``, read without importing the runtime:
    ``--help`` never imports torch; a test keeps them equal to the strategy
    registry's names). ``tpu``/``xla`` get the reason they are not supported, as
    the same value from pyproject.toml or the environment does, not click's list
    of choices alone."""

    def __init__(self) -> None:
        super().__init__(strategy_choices())

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and value.lower() in ("tpu", "xla"):
            from .runtime_config import config_without_torch

            self.fail(f"{value!r}: {config_without_torch().NO_TPU}", param, ctx)
        return super().convert(value, param, ctx)


def strategy_choices() -> tuple[str, ...]:
    """``auto`` and the runtime configuration's other strategies, sorted."""
    from .runtime_config import config_without_torch

    names = [n for n in config_without_torch().STRATEGIES if n != "auto"]
    return ("auto", *sorted(names))


#: How the runtime shards and places the model: the same options for ``launch``
#: and ``verify`` (which hands them on to the launcher of its migrated run).
SCALE_OPTIONS = [
    click.option(
        "--fsdp-wrap",
        type=click.Choice(["blocks", "root"]),
        default=None,
        help="FSDP units: each repeated block and the root (default), or the root only.",
    ),
    click.option(
        "--fsdp-block-classes",
        default=None,
        metavar="NAMES",
        help="Comma-separated class names that are FSDP blocks (instead of the detected ones).",
    ),
    click.option(
        "--fsdp-min-params",
        type=int,
        default=None,
        help="With no repeated blocks: a submodule of at least this many parameters is an FSDP unit.",
    ),
    click.option(
        "--no-reshard-after-forward",
        is_flag=True,
        default=False,
        help="FSDP keeps each unit's gathered parameters from forward to backward (more memory, fewer all-gathers).",
    ),
    click.option(
        "--fsdp-cpu-offload",
        is_flag=True,
        default=False,
        help="FSDP on a GPU keeps the sharded parameters, gradients and optimizer state in host memory; the optimizer steps on the CPU (no effect on a CPU device).",
    ),
    click.option(
        "--activation-checkpointing",
        is_flag=True,
        default=False,
        help="FSDP recomputes each block's activations in backward instead of keeping them.",
    ),
    click.option(
        "--zero-stage",
        type=click.Choice(["1", "2", "3"]),
        default=None,
        help="DeepSpeed ZeRO stage (--strategy deepspeed; default 2): 1 shards optimizer state, 2 also gradients, 3 also parameters.",
    ),
    click.option(
        "--deepspeed-config",
        default=None,
        metavar="FILE",
        help="A JSON file of DeepSpeed entries merged over the generated config (--strategy deepspeed); entries that change the batch, accumulation, clipping, precision or stage are refused.",
    ),
]
#: Each scale option's flag, as ``verify`` gives it back to ``launch``.
_SCALE_FLAGS = {
    "fsdp_wrap": "--fsdp-wrap",
    "fsdp_block_classes": "--fsdp-block-classes",
    "fsdp_min_params": "--fsdp-min-params",
    "no_reshard_after_forward": "--no-reshard-after-forward",
    "fsdp_cpu_offload": "--fsdp-cpu-offload",
    "activation_checkpointing": "--activation-checkpointing",
    "zero_stage": "--zero-stage",
    "deepspeed_config": "--deepspeed-config",
}


def scale_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(SCALE_OPTIONS):
        command = option(command)
    return command


def scale_settings(options: dict[str, Any]) -> dict[str, Any]:
    """The runtime settings the scale options give (None: not given here)."""
    return {
        "fsdp_wrap": options.get("fsdp_wrap"),
        "fsdp_block_classes": options.get("fsdp_block_classes"),
        "fsdp_min_params": options.get("fsdp_min_params"),
        "fsdp_reshard_after_forward": (
            False if options.get("no_reshard_after_forward") else None
        ),
        "fsdp_cpu_offload": True if options.get("fsdp_cpu_offload") else None,
        "activation_checkpointing": (
            True if options.get("activation_checkpointing") else None
        ),
        "zero_stage": options.get("zero_stage"),
        "deepspeed_config": options.get("deepspeed_config"),
    }


def scale_arguments(options: dict[str, Any]) -> list[str]:
    """The launcher arguments for the scale options given in ``options``."""
    args: list[str] = []
    for name, flag in _SCALE_FLAGS.items():
        value = options.get(name)
        if value is True:
            args.append(flag)
        elif value not in (None, False):
            args += [flag, str(value)]
    return args


@click.command(
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": ["-h", "--help"],
    }
)
@click.option(
    "--nproc",
    "--nproc-per-node",
    "--nproc_per_node",
    "nproc",
    default="auto",
    show_default=True,
    metavar="N",
    envvar="PET_NPROC_PER_NODE",
    help=(
        "Processes per node: a number, or 'auto' (one per GPU; 1 without GPUs, "
        "or for a script kept on the CPU)."
    ),
)
@click.option(
    "--strategy",
    type=StrategyChoice(),
    default=None,
    help="Default: [tool.accel-migrate] in pyproject.toml, else auto (ddp for >1 process).",
)
@click.option(
    "--precision",
    type=click.Choice(["fp32", "bf16", "fp16"]),
    default=None,
    help="Default: [tool.accel-migrate] in pyproject.toml, else fp32.",
)
@click.option(
    "--batch-mode",
    type=click.Choice(["global", "per-device"]),
    default=None,
    help="global: keep the script's batch and split it; per-device: each process takes whole batches.",
)
@click.option(
    "--no-sync-batchnorm",
    is_flag=True,
    default=False,
    help="BatchNorm normalises by each process's own samples (faster; losses differ from the original's).",
)
@scale_options
@click.option(
    "--nnodes",
    default="1",
    show_default=True,
    envvar="PET_NNODES",
    help="Number of nodes (or MIN:MAX).",
)
@click.option(
    "--node-rank",
    "--node_rank",
    "node_rank",
    type=int,
    default=None,
    envvar="PET_NODE_RANK",
    help="This node's rank (multi-node, static rendezvous).",
)
@click.option(
    "--rdzv-endpoint",
    "--rdzv_endpoint",
    "rdzv_endpoint",
    default=None,
    metavar="HOST:PORT",
    envvar="PET_RDZV_ENDPOINT",
    help="Rendezvous endpoint (multi-node).",
)
@click.option(
    "--rdzv-id",
    "--rdzv_id",
    "rdzv_id",
    default=None,
    envvar="PET_RDZV_ID",
    help="Job id shared by all nodes (multi-node).",
)
@click.option(
    "--rdzv-backend",
    "--rdzv_backend",
    "rdzv_backend",
    default=None,
    envvar="PET_RDZV_BACKEND",
    help="Rendezvous backend (multi-node; default c10d with --rdzv-endpoint).",
)
@click.option(
    "--rdzv-conf",
    "--rdzv_conf",
    "rdzv_conf",
    default=None,
    metavar="KEY=VALUE,...",
    envvar="PET_RDZV_CONF",
    help="Extra rendezvous settings, as torchrun takes them.",
)
@click.option(
    "--master-addr",
    "--master_addr",
    "master_addr",
    default=None,
    envvar="PET_MASTER_ADDR",
    help="Address of the node of rank 0 (static rendezvous, with --master-port).",
)
@click.option(
    "--master-port",
    "--master_port",
    "master_port",
    type=int,
    default=None,
    envvar="PET_MASTER_PORT",
    help="Port on the node of rank 0 (static rendezvous).",
)
@click.option(
    "--standalone",
    is_flag=True,
    default=False,
    envvar="PET_STANDALONE",
    help="One node, a local rendezvous on a free port (the default for one node).",
)
@click.option(
    "--max-restarts",
    "--max_restarts",
    "max_restarts",
    type=int,
    default=0,
    show_default=True,
    envvar="PET_MAX_RESTARTS",
    help="Restart the job this many times on failure.",
)
@click.option(
    "--log-dir",
    "--log_dir",
    "log_dir",
    default=None,
    envvar="PET_LOG_DIR",
    help="Keep torchrun's per-rank logs in this folder.",
)
@click.option(
    "-r",
    "--redirects",
    default=None,
    envvar="PET_REDIRECTS",
    help="Send ranks' output to files in --log-dir: 0-3 (none, out, err, both) or RANK:N,...",
)
@click.option(
    "-t",
    "--tee",
    default=None,
    envvar="PET_TEE",
    help="Also copy ranks' output to files in --log-dir, rank-prefixed on the console.",
)
@click.option(
    "--local-ranks-filter",
    "--local_ranks_filter",
    "local_ranks_filter",
    default=None,
    metavar="RANKS",
    envvar="PET_LOCAL_RANKS_FILTER",
    help="Show only these local ranks' output (comma-separated), with --tee or --redirects.",
)
@click.option(
    "-m",
    "--module",
    "module",
    is_flag=True,
    default=False,
    help="SCRIPT is a module name, run as python -m SCRIPT.",
)
@click.option(
    "--timeout",
    type=float,
    default=None,
    help="Seconds a collective may wait before the job fails.",
)
@click.argument("script")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def launch(script: str, script_args: tuple[str, ...], **options: Any) -> int:
    """Run SCRIPT on several processes (torchrun underneath)."""
    if not _have_torch("launch"):
        return EXIT_USAGE
    from .launch_command import run_launch

    context = click.get_current_context()
    # Where each option came from, for the start-up banner.
    sources = {
        name: str(getattr(context.get_parameter_source(name), "name", "DEFAULT"))
        for name in options
    }
    return run_launch(script, list(script_args), sources=sources, **options)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--nproc",
    type=int,
    default=2,
    show_default=True,
    help="Processes for the migrated run.",
)
@click.option(
    "--steps",
    type=int,
    default=20,
    show_default=True,
    help="Optimizer steps to compare.",
)
@click.option(
    "--strategy",
    type=StrategyChoice(),
    default=None,
)
@click.option("--precision", type=click.Choice(["fp32", "bf16", "fp16"]), default=None)
@scale_options
@click.option(
    "--tolerance",
    type=float,
    default=None,
    help="Relative error allowed per step (default: fp32 1e-5, bf16 5e-2, fp16 1e-2).",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a markdown report (diff summary, findings, parity table, verdict).",
)
@click.option(
    "--deterministic",
    is_flag=True,
    default=False,
    help="Run both with dropout off and the step's random draws identical per sample.",
)
@click.argument("script")
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
def verify(script: str, script_args: tuple[str, ...], **options: Any) -> int:
    """Run SCRIPT and its migration; compare the losses step by step.

    \b
    accel-migrate verify train.py --nproc 2 --steps 20 -- --epochs 1
    Exit 0: same losses within tolerance, or different only by stochastic
    layers (checked with them off); 1: they differ; 123: a run crashed.
    """
    if not _have_torch("verify"):
        return EXIT_USAGE
    from .verify_command import run_verify

    return run_verify(script, list(script_args), **options)


def _have_torch(command: str) -> bool:
    """``launch`` and ``verify`` run the script with the environment's torch."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print(
            f"error: accel-migrate {command} needs PyTorch in this environment: "
            "pip install torch (or pip install 'accel-migrate[torch]')",
            file=sys.stderr,
        )
        return False
    return True
