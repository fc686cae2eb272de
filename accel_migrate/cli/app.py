"""The command line. Thin: parse options, call the codemod or the launcher, render.

Nothing heavy is imported at module level, so ``accel-migrate --help`` stays fast:
libcst, rich and torch load inside the commands that need them.
"""

from __future__ import annotations

import sys
from typing import Any

import click

EXIT_OK = 0
EXIT_WOULD_CHANGE = 1
EXIT_USAGE = 2
EXIT_FAILED = 123


class _DefaultGroup(click.Group):
    """``accel-migrate PATH...`` means ``accel-migrate migrate PATH...``."""

    default_command = "migrate"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if (
            args
            and args[0] not in self.commands
            and args[0] not in ("--help", "-h", "--version")
        ):
            args = [self.default_command, *args]
        elif not args:
            args = [self.default_command]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage("accel-migrate", "[OPTIONS] PATH... | COMMAND [ARGS]...")


@click.group(
    cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="accel-migrate", prog_name="accel-migrate")
def cli() -> None:
    """Migrate single-GPU PyTorch training scripts to multi-process training.

    \b
    accel-migrate PATH...            show the diff and findings; write nothing
    accel-migrate PATH... --write    rewrite the files in place
    accel-migrate PATH... --check    exit 1 if anything would change
    accel-migrate PATH... --diff     a plain diff that `git apply` accepts
    accel-migrate -                  read stdin, write the migrated code to stdout
    accel-migrate launch --nproc 2 train.py ARGS...
    accel-migrate verify train.py -- ARGS...   compare the original's and the migrated losses
    accel-migrate rules [CODE]       list the rules, or show one rule's documentation
    accel-migrate config             write the runtime settings into pyproject.toml
    accel-migrate env                versions, devices and runtime settings, for bug reports
    """


@cli.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--write", is_flag=True, help="Rewrite the files in place.")
@click.option(
    "--check", is_flag=True, help="Write nothing; exit 1 if any file would change."
)
@click.option(
    "--diff",
    "plain_diff",
    is_flag=True,
    help="Print a unified diff (with --check too); coloured only on a terminal "
    "or with --color always, so that `git apply` takes it piped.",
)
@click.option(
    "--output-format",
    type=click.Choice(["text", "concise", "json", "github", "sarif"]),
    default="text",
    show_default=True,
    help="How to report: for people, one line per finding, for scripts, "
    "GitHub annotations, SARIF 2.1.0.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Files migrated in parallel (default: the number of CPUs).",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Read the settings from FILE, not from the nearest pyproject.toml.",
)
@click.option(
    "--select",
    default=None,
    metavar="CODES",
    help="Comma-separated rule codes (prefixes) to run.",
)
@click.option(
    "--extend-select",
    default=None,
    metavar="CODES",
    help="Comma-separated rule codes (prefixes) to run as well as --select's.",
)
@click.option(
    "--ignore",
    default=None,
    metavar="CODES",
    help="Comma-separated rule codes (prefixes) to skip.",
)
@click.option(
    "--exclude",
    default=None,
    metavar="PATTERNS",
    help="Comma-separated gitignore-style patterns; replaces the default excludes.",
)
@click.option(
    "--extend-exclude",
    default=None,
    metavar="PATTERNS",
    help="Comma-separated gitignore-style patterns to exclude as well.",
)
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply the excludes to files named on the command line too (pre-commit).",
)
@click.option(
    "--respect-gitignore/--no-respect-gitignore",
    default=None,
    help="Skip what .gitignore files ignore (default: yes).",
)
@click.option(
    "--alias",
    default=None,
    metavar="NAME",
    help="Name of the runtime import (import accel_migrate.runtime as NAME).",
)
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default=None,
    help="Colour diffs and reports: always, never, or auto (on a terminal, "
    "unless NO_COLOR is set; the default).",
)
@click.option("--no-color", is_flag=True, help="The same as --color never.")
@click.option(
    "--exit-zero",
    is_flag=True,
    help="Exit 0 even when --check finds files that would change "
    "(files that fail still exit 123).",
)
@click.option(
    "--stdin-filename",
    default=None,
    metavar="PATH",
    help="The name of the file read from stdin: for messages, per-file-ignores "
    "and finding the configuration.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Neither read nor write the results cache (~/.cache/accel-migrate).",
)
@click.option("-q", "--quiet", is_flag=True, help="Only errors and the summary line.")
def migrate(
    paths: tuple[str, ...],
    write: bool,
    check: bool,
    plain_diff: bool,
    output_format: str,
    jobs: int | None,
    config: str | None,
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    exclude: str | None,
    extend_exclude: str | None,
    force_exclude: bool,
    respect_gitignore: bool | None,
    alias: str | None,
    color: str | None,
    no_color: bool,
    exit_zero: bool,
    stdin_filename: str | None,
    no_cache: bool,
    quiet: bool,
) -> int:
    """Migrate PATH... (files or folders; '-' for stdin)."""
    from .migrate_command import run_migrate

    if write and check:
        raise click.UsageError("--write and --check exclude each other")
    if no_color and color not in (None, "never"):
        raise click.UsageError(f"--no-color and --color {color} exclude each other")
    if "-" in paths and len(paths) > 1:
        raise click.UsageError("'-' (stdin) cannot be combined with other paths")
    if "-" in paths and output_format not in ("text", "concise"):
        raise click.UsageError(
            "'-' (stdin) works with --output-format text or concise only"
        )
    if stdin_filename is not None and paths != ("-",):
        raise click.UsageError("--stdin-filename goes with '-' (stdin) only")
    if paths != ("-",):
        problem = _command_like(paths[0])
        if problem is not None:
            print(f"error: {problem}", file=sys.stderr)
            return EXIT_USAGE
    return run_migrate(
        list(paths),
        mode="write" if write else "check" if check else "preview",
        plain_diff=plain_diff,
        output_format=output_format,
        jobs=jobs,
        config=config,
        select=_codes(select) if select is not None else None,
        extend_select=_codes(extend_select) if extend_select is not None else None,
        ignore=_codes(ignore) if ignore is not None else None,
        exclude=_patterns(exclude) if exclude is not None else None,
        extend_exclude=(
            _patterns(extend_exclude) if extend_exclude is not None else None
        ),
        force_exclude=force_exclude,
        respect_gitignore=respect_gitignore,
        alias=alias,
        color=_color("never" if no_color else color),
        quiet=quiet,
        cache=not no_cache,
        exit_zero=exit_zero,
        stdin_filename=stdin_filename,
    )


def _color(when: str | None) -> bool | None:
    """True/False when asked for; None: decide per stream (a terminal, no NO_COLOR)."""
    import os

    if when == "always":
        return True
    if when == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    return None


def _command_like(first: str) -> str | None:
    """A first argument that is no file and a bare word, like a command
    (``accel-migrate rule AM001``, ``accel-migrate envv``), is a usage error (as
    black makes a missing path), not a file that failed."""
    import os
    from difflib import get_close_matches

    if os.path.exists(first) or "/" in first or os.sep in first or "." in first:
        return None
    commands = sorted(cli.commands)
    near = get_close_matches(first.lower(), commands, n=1, cutoff=0.6)
    hint = f" (did you mean `accel-migrate {near[0]}`?)" if near else ""
    return f"no such command or file: {first!r}{hint}; commands: {', '.join(commands)}"


@cli.command(
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
    help="Processes per node: a number, or 'auto' (one per GPU, or 1 without GPUs).",
)
@click.option(
    "--strategy",
    type=click.Choice(["auto", "single", "ddp", "fsdp", "deepspeed", "hsdp"]),
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
@click.option(
    "--fsdp-wrap",
    type=click.Choice(["blocks", "root"]),
    default=None,
    help="FSDP units: each repeated block and the root (default), or the root only.",
)
@click.option(
    "--fsdp-block-classes",
    default=None,
    metavar="NAMES",
    help="Comma-separated class names that are FSDP blocks (instead of the detected ones).",
)
@click.option(
    "--fsdp-min-params",
    type=int,
    default=None,
    help="With no repeated blocks: a submodule of at least this many parameters is an FSDP unit.",
)
@click.option(
    "--no-reshard-after-forward",
    is_flag=True,
    default=False,
    help="FSDP keeps each unit's gathered parameters from forward to backward (more memory, fewer all-gathers).",
)
@click.option(
    "--activation-checkpointing",
    is_flag=True,
    default=False,
    help="FSDP recomputes each block's activations in backward instead of keeping them.",
)
@click.option(
    "--zero-stage",
    type=click.Choice(["1", "2", "3"]),
    default=None,
    help="DeepSpeed ZeRO stage (--strategy deepspeed; default 2): 1 shards optimizer state, 2 also gradients, 3 also parameters.",
)
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


@cli.command(context_settings={"help_option_names": ["-h", "--help"]})
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
    type=click.Choice(["auto", "single", "ddp", "fsdp", "deepspeed"]),
    default=None,
)
@click.option("--precision", type=click.Choice(["fp32", "bf16", "fp16"]), default=None)
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


@cli.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code", required=False)
def rules(code: str | None) -> int:
    """List the rules, or print the documentation of rule CODE."""
    from .rules_command import run_rules

    return run_rules(code)


@cli.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
)
def env(output_format: str) -> int:
    """Print versions, devices and the resolved runtime configuration (for bug reports)."""
    from .env_command import run_env

    return run_env(output_format)


@cli.command("config", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--strategy", default=None, help="auto, single, ddp or fsdp.")
@click.option("--precision", default=None, help="fp32, bf16 or fp16.")
@click.option("--batch-mode", default=None, help="global or per-device.")
@click.option("--timeout", default=None, help="Seconds a collective may wait.")
@click.option("--sync-batchnorm/--no-sync-batchnorm", default=None)
@click.option("--fsdp-wrap", default=None, help="blocks or root.")
@click.option("--fsdp-block-classes", default=None, metavar="NAMES")
@click.option("--fsdp-min-params", default=None, metavar="N")
@click.option(
    "--reshard-after-forward/--no-reshard-after-forward",
    "fsdp_reshard_after_forward",
    default=None,
)
@click.option("--activation-checkpointing/--no-activation-checkpointing", default=None)
@click.option(
    "--file",
    "file",
    default="pyproject.toml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The file to write the table into (created if missing).",
)
@click.option(
    "-y",
    "--yes",
    is_flag=True,
    help="Ask nothing: write strategy, precision and batch mode (from the "
    "flags, else the defaults) and the other settings flagged.",
)
@click.option("--force", is_flag=True, help="Replace settings the table already has.")
def config_command(file: str, yes: bool, force: bool, **flags: Any) -> int:
    """Write the runtime settings into [tool.accel-migrate] of pyproject.toml.

    \b
    On a terminal it asks (strategy, precision, batch mode), with defaults.
    accel-migrate config --strategy fsdp --precision bf16 --yes   asks nothing
    Other tables and comments of the file are kept as they are.
    """
    from .config_command import run_config

    return run_config(flags, file=file, yes=yes, force=force)


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


def _codes(raw: str) -> frozenset[str]:
    return frozenset(c.strip().upper() for c in raw.split(",") if c.strip())


def _patterns(raw: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in raw.split(",") if p.strip())


def main(argv: list[str] | None = None) -> int:
    """Run the CLI with ``argv``; return the exit code instead of exiting."""
    try:
        result = cli.main(args=argv, prog_name="accel-migrate", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.UsageError as exc:
        exc.show(file=sys.stderr)
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show(file=sys.stderr)
        return exc.exit_code
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    if isinstance(result, int):
        return result
    return EXIT_OK
