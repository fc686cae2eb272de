"""The ``accel-migrate`` command group: ``PATH...`` alone means ``migrate``.

The commands are declared in ``migrate_cli`` (migrate), ``run_cli`` (launch and
verify, which run the script) and here (rules, env, config); each parses its
options with click and hands them to its ``*_command`` module, imported when
the command runs, so that nothing heavy loads for ``--help``.
"""

from __future__ import annotations

from typing import Any

import click

from .migrate_cli import migrate
from .run_cli import launch, verify


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


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("code", required=False)
def rules(code: str | None) -> int:
    """List the rules, or print the documentation of rule CODE."""
    from .rules_command import run_rules

    return run_rules(code)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
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


@click.command("config", context_settings={"help_option_names": ["-h", "--help"]})
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
@click.option("--fsdp-cpu-offload/--no-fsdp-cpu-offload", default=None)
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


for _command in (migrate, launch, verify, rules, env, config_command):
    cli.add_command(_command)
