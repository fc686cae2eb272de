"""``accel-migrate launch``: resolve the configuration, then hand off to torchrun.

The launcher adds nothing to torchrun's process management or rendezvous; it
validates the strategy and precision before any process starts, passes them to
the processes as environment variables, and picks torchrun's options.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..runtime.config import ConfigError, RuntimeConfig, config_environment, load_config
from ..runtime.env import DONE_DIR_VARIABLE
from ..runtime.faults import RECORDED_AT, STOPPED_BY_PEER
from .exit_codes import EXIT_OK, EXIT_USAGE
from .launch_options import (
    banner,
    check_options,
    extra_torchrun_arguments,
    keeps_cpu,
    module_file,
    offload_note,
    unknown_option,
)
from .run_cli import scale_settings
from .unmigrated import unmigrated_warning

EXIT_JOB_FAILED = 1


def _processes_per_node(nproc: str, cpu_only: bool = False) -> int:
    """``--nproc``: a number, or ``auto``: one per GPU, one without GPUs, and
    one for a script that keeps every process on the CPU
    (``accel.device(accelerator=False)``, ``cpu_only``) whatever the machine
    has: its processes would not use the GPUs, so their count must not decide
    its world size (the same script gets the same job on any machine)."""
    if nproc == "auto":
        if cpu_only:
            return 1
        import torch

        return max(torch.cuda.device_count(), 1) if torch.cuda.is_available() else 1
    try:
        count = int(nproc)
    except ValueError:
        raise ConfigError(f"--nproc={nproc!r} is not a number or 'auto'") from None
    if count < 1:
        raise ConfigError(f"--nproc={nproc!r} must be at least 1")
    return count


def check_launch(
    config: RuntimeConfig, processes: int, nnodes: str, command: str = "launch"
) -> None:
    """Refuse combinations that cannot run, before starting anything (for
    ``command``: verify has no --nnodes to suggest)."""
    multi = processes > 1 or nnodes not in ("1", "1:1")
    if config.strategy == "single" and multi:
        raise ConfigError(
            f"strategy 'single' (from {config.source_of('strategy')}) runs one process, "
            f"but --nproc {processes} --nnodes {nnodes} asks for more; use ddp, fsdp or auto"
        )
    _check_settings_read(config, "ddp" if multi else "single")
    if config.strategy == "deepspeed":
        # Here, not in every worker's traceback: DeepSpeed missing, fp16 on the CPU.
        from ..runtime.strategies import deepspeed_zero

        deepspeed_zero.check_launch(config)
    if config.strategy == "hsdp" and nnodes in ("1", "1:1"):
        raise ConfigError(
            f"strategy 'hsdp' (from {config.source_of('strategy')}) replicates across "
            + (
                "nodes, but --nnodes is 1; on one node HSDP is plain FSDP: use "
                "--strategy fsdp (or --nnodes 2 or more)"
                if command == "launch"
                else "nodes, but verify runs its migrated copy on one node, where "
                "HSDP is plain FSDP: use --strategy fsdp"
            )
        )


def _check_settings_read(config: RuntimeConfig, auto: str) -> None:
    """A strategy's own option given as a flag to a strategy that ignores it
    (``--zero-stage 3`` with ``--strategy ddp``) would change nothing, silently.
    From pyproject.toml or the environment such a setting is a default for when
    that strategy runs, and is not refused."""
    from ..runtime.strategies import strategies_reading, strategy_class

    name = auto if config.strategy == "auto" else config.strategy
    came = config.source_of("strategy")
    shown = f"auto, from {came}" if config.strategy == "auto" else f"from {came}"
    reads = strategy_class(name).settings
    for key, source in config.sources:
        if not source.startswith("--") or key in reads:
            continue
        readers = strategies_reading(key)
        if readers:  # a strategy's own setting, not one every strategy reads
            raise ConfigError(
                f"{source} is not read by strategy {name!r} ({shown}): it is an "
                f"option of --strategy {' or '.join(readers)}; drop it or choose "
                "that strategy"
            )


def torchrun_arguments(
    script: str,
    script_args: list[str],
    *,
    processes: int,
    nnodes: str,
    node_rank: int | None,
    rdzv_endpoint: str | None,
    rdzv_id: str | None,
    max_restarts: int,
    rdzv_backend: str | None = None,
    master_addr: str | None = None,
    master_port: int | None = None,
    module: bool = False,
) -> list[str]:
    args: list[str] = []
    if master_addr is not None or (master_port is not None and rdzv_endpoint is None):
        # Static rendezvous, as torchrun's --master-addr/--master-port give it.
        args += ["--nnodes", nnodes, "--node-rank", str(node_rank or 0)]
        args += ["--master-addr", master_addr or "127.0.0.1"]
        args += ["--master-port", str(master_port or 29500)]
    elif rdzv_endpoint is None and nnodes in ("1", "1:1"):
        args.append("--standalone")
    else:
        if rdzv_endpoint is None:
            raise ConfigError(f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT")
        args += [
            "--nnodes",
            nnodes,
            "--rdzv-backend",
            rdzv_backend or "c10d",
            "--rdzv-endpoint",
            rdzv_endpoint,
        ]
        args += ["--rdzv-id", rdzv_id or "accel-migrate"]
        if node_rank is not None:
            args += ["--node-rank", str(node_rank)]
    args += ["--nproc-per-node", str(processes), "--max-restarts", str(max_restarts)]
    if module:
        args.append("--module")
    return [*args, script, *script_args]


def first_slurm_host(nodelist: str) -> str:
    """``node[01-04,07],gpu9`` -> ``node01``: the first host of a Slurm node list."""
    head = (
        nodelist.split(",", 1)[0] if "[" not in nodelist.split(",", 1)[0] else nodelist
    )
    if "[" not in head:
        return head.strip()
    prefix, _, rest = head.partition("[")
    first = rest.split("]", 1)[0].split(",", 1)[0].split("-", 1)[0]
    return f"{prefix.strip()}{first}"


def slurm_options(options: dict[str, Any], environ: dict[str, str]) -> dict[str, Any]:
    """Fill the multi-node options from Slurm's variables where the user gave none."""
    nodes = environ.get("SLURM_NNODES") or environ.get("SLURM_JOB_NUM_NODES")
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodes or not nodelist or nodes == "1":
        return options
    if options["nnodes"] not in ("1", None) or options["rdzv_endpoint"] is not None:
        return options  # the user's flags win
    port = environ.get("MASTER_PORT", "29500")
    return {
        **options,
        "nnodes": nodes,
        "node_rank": int(environ.get("SLURM_NODEID", "0")),
        "rdzv_endpoint": f"{first_slurm_host(nodelist)}:{port}",
        "rdzv_id": options["rdzv_id"] or environ.get("SLURM_JOB_ID", "accel-migrate"),
    }


def run_launch(
    script: str,
    script_args: list[str],
    sources: dict[str, str] | None = None,
    **options: Any,
) -> int:
    sources = dict(sources or {})
    slurm = slurm_options(options, dict(os.environ))
    if slurm is not options:
        options = slurm
        sources["nnodes"] = "SLURM"
    try:
        unknown = unknown_option(script)
        if unknown is not None:
            raise ConfigError(unknown)
        config = load_config(
            {
                "strategy": options["strategy"],
                "precision": options["precision"],
                "batch_mode": options["batch_mode"],
                "timeout": options["timeout"],
                "sync_batchnorm": (False if options.get("no_sync_batchnorm") else None),
                **scale_settings(options),
            }
        )
        module = bool(options.get("module"))
        source_file: str | None = script
        if module:
            found = module_file(script, Path.cwd())
            source_file = str(found) if found is not None else None
        elif not os.path.isfile(script):
            raise ConfigError(f"{script}: no such script")
        cpu_only = keeps_cpu(source_file)
        processes = _processes_per_node(options["nproc"], cpu_only)
        check_options(options, processes)
        check_launch(config, processes, options["nnodes"])
        argv = torchrun_arguments(
            script,
            [],
            processes=processes,
            nnodes=options["nnodes"],
            node_rank=options["node_rank"],
            rdzv_endpoint=options["rdzv_endpoint"],
            rdzv_id=options["rdzv_id"],
            max_restarts=options["max_restarts"],
            rdzv_backend=options.get("rdzv_backend"),
            master_addr=options.get("master_addr"),
            master_port=options.get("master_port"),
            module=module,
        )
        argv = [*extra_torchrun_arguments(options), *argv]
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    warning = (
        unmigrated_warning(source_file, processes, options["nnodes"])
        if source_file is not None
        else None
    )
    if warning is not None:
        print(
            warning.replace(source_file or "", script, 1), file=sys.stderr, flush=True
        )
    import torch

    if options["node_rank"] in (None, 0):
        line = banner(
            config,
            processes,
            options,
            sources,
            cuda=torch.cuda.is_available(),
            slurm=sources.get("nnodes") == "SLURM",
            cpu_only=cpu_only,
        )
        print(line, file=sys.stderr, flush=True)
        note = offload_note(config, torch.cuda.is_available())
        if note is not None:
            print(note, file=sys.stderr, flush=True)
    os.environ.update(config_environment(config))
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    # One folder for the job's bookkeeping, removed when the job ends.
    work = tempfile.mkdtemp(prefix="accel-migrate-launch-")
    done_dir = os.path.join(work, "done")
    os.mkdir(done_dir)
    os.environ[DONE_DIR_VARIABLE] = done_dir
    # Where torchrun copies the failing worker's error report (otherwise it logs
    # that it has nowhere to put it); torchrun creates it only when a worker fails.
    ours = "TORCHELASTIC_ERROR_FILE" not in os.environ
    if ours:
        os.environ["TORCHELASTIC_ERROR_FILE"] = os.path.join(work, "error.json")
    # torchrun would otherwise leave a folder in the temp folder for every run.
    log_dir = options.get("log_dir") or os.path.join(work, "logs")
    try:
        start_torchrun(["--log-dir", log_dir, *argv], script_args)
    except ChildFailedError as failure:
        if _only_aborted_after_finishing(failure, done_dir, processes):
            return EXIT_OK
        rank, first = root_failure(failure)
        print(f"error: the job failed: {failure_summary(rank, first)}", file=sys.stderr)
        return EXIT_JOB_FAILED
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if ours:
            del os.environ["TORCHELASTIC_ERROR_FILE"]
    return EXIT_OK


def start_torchrun(argv: list[str], script_args: list[str]) -> None:
    """torchrun with ``argv`` (its options and the script), then ``script_args``.

    The script's arguments are set on the parsed namespace, not parsed: torchrun's
    argparse accepts abbreviations, so a script's ``--log`` or ``--nproc`` would be
    taken for (or be ambiguous with) torchrun's ``--log-dir`` or ``--nproc-per-node``.
    """
    from torch.distributed import run as torchrun

    parsed = torchrun.get_args_parser().parse_args(argv)
    parsed.training_script_args = list(script_args)
    torchrun.run(parsed)


def root_failure(failure: Any) -> tuple[int, Any]:
    """The rank whose own failure failed the job.

    torchrun's ``get_first_failure`` orders failures by whole seconds, and a rank
    that was only stopped by its peer's failure (it exits with code 1 in the same
    second) wins the tie when its rank is lower. The runtime's processes record
    what ended them (``faults.record_error``): an error of their own comes first,
    ordered by the time recorded; then a process that died without a record (a
    signal, ``sys.exit``) other than those torchrun closed; the rest in torchrun's
    order.
    """
    records = {rank: _record(process) for rank, process in failure.failures.items()}
    raised = {
        rank: when
        for rank, (when, stopped) in records.items()
        if when is not None and not stopped
    }
    if raised:
        rank = min(raised, key=lambda r: (raised[r], r))
        return rank, failure.failures[rank]
    # SIGTERM is torchrun's own closing signal for the processes still running.
    silent = [
        rank
        for rank, (when, _) in records.items()
        if when is None and failure.failures[rank].exitcode != -signal.SIGTERM
    ]
    if silent:
        rank = min(silent, key=lambda r: (failure.failures[r].timestamp, r))
        return rank, failure.failures[rank]
    return failure.get_first_failure()


def failure_summary(rank: int, process: Any) -> str:
    """``rank 1 (pid 42) exited with code 1 first; its traceback is above``."""
    if process.exitcode < 0:
        try:
            how = f"was ended by {signal.Signals(-process.exitcode).name}"
        except ValueError:
            how = f"was ended by signal {-process.exitcode}"
    else:
        how = f"exited with code {process.exitcode}"
    when, stopped = _record(process)
    # A process that raised printed its traceback before anything else failed.
    where = "; its traceback is above" if when is not None and not stopped else ""
    return f"rank {rank} (pid {process.pid}) {how} first{where}"


def _record(process: Any) -> tuple[float | None, bool]:
    """(time recorded, stopped by a peer) from a process's error file."""
    message = getattr(process, "error_file_data", {}).get("message")
    if not isinstance(message, dict):
        return None, False
    extra = message.get("extraInfo", {})
    try:
        when = float(extra.get(RECORDED_AT, extra.get("timestamp")))
    except (TypeError, ValueError):
        return None, False
    return when, bool(extra.get(STOPPED_BY_PEER, False))


def _only_aborted_after_finishing(failure: Any, done_dir: str, processes: int) -> bool:
    """With torch 2.13, a gloo job now and then aborts in one rank at exit ("terminate
    called without an active exception"), plain torch scripts included. When every
    failure is such an abort (SIGABRT) and every process of this node had finished
    its script first, the job's work is complete: say so, and do not fail it."""
    failures = failure.failures
    aborted = sorted(r for r, f in failures.items() if f.exitcode == -signal.SIGABRT)
    # The others were stopped by torchrun (SIGTERM) because of the abort.
    stopped = {-signal.SIGABRT, -signal.SIGTERM}
    if not aborted or any(f.exitcode not in stopped for f in failures.values()):
        return False
    if len(os.listdir(done_dir)) < processes:
        return False
    ranks = ", ".join(str(rank) for rank in aborted)
    print(
        f"warning: rank {ranks} aborted in torch's process-group teardown after its "
        "script had finished (a torch/gloo exit race); every process had finished "
        "its work, so the job succeeded",
        file=sys.stderr,
    )
    return True
