"""Run a fixture script as the original (one process) and migrated (under
``accel-migrate launch``), and read back its losses and final parameters.

Fixture convention: the script prints ``... loss <float>`` once per optimizer step
and takes ``--out PATH`` to save its final state dict with ``torch.save``.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from accel_migrate.codemod import MigrationResult, migrate_source
from tests import warm_python

STEP_LOSS = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)
TIMEOUT = 180
#: Seconds to read what a timed-out run wrote once its processes are killed.
AFTER_KILL = 10


@dataclass(frozen=True)
class Run:
    stdout: str
    losses: list[float]
    state: dict[str, torch.Tensor]

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith(prefix)]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("WORLD_SIZE", None)
    env.pop("RANK", None)
    env["PYTHONHASHSEED"] = "0"
    # Parity compares float results: keep every process on one thread, as torchrun does.
    env["OMP_NUM_THREADS"] = "1"
    return env


class RunFailed(AssertionError):
    """A run that exited non-zero, with what it wrote (for callers that classify it)."""

    def __init__(self, message: str, returncode: int, stdout: str, stderr: str):
        super().__init__(message)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def _limit_memory(limit: int | None):
    if limit is None:
        return None

    def apply() -> None:
        # Per process, inherited by torchrun's workers: a run that grows without
        # bound fails with MemoryError instead of taking the shared machine down.
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _run(
    command: list[str],
    cwd: Path,
    timeout: float = TIMEOUT,
    memory_limit: int | None = None,
) -> str:
    env = _environment()
    if command[0] == sys.executable:
        # A forked interpreter that has imported torch already, for the command and
        # (PYTHON_EXEC) the launcher's workers: tests/warm_python.py.
        command = [warm_python.python(env), *command[1:]]
        env = warm_python.environment(env)
    # Own process group: on a timeout the launcher's workers are killed too, not
    # left behind waiting in a collective.
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_limit_memory(memory_limit),
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        # The whole tree: torchrun starts each worker in a session of its own, which
        # the group's kill alone leaves running (and holding the output pipes).
        # Under the warm interpreter the command is the server's child, not the
        # shim's: the server kills its tree when the shim dies (warm_python._wait).
        warm_python.kill_tree(process.pid)
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            stdout, stderr = process.communicate(timeout=AFTER_KILL)
        except subprocess.TimeoutExpired:
            # Something outside the tree still holds the pipes: give up on them
            # rather than stall the suite.
            process.kill()
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()
            process.wait()
            stdout, stderr = (
                "",
                f"(output pipes still open {AFTER_KILL} s after the kill)",
            )
        raise subprocess.TimeoutExpired(
            command, timeout, output=stdout, stderr=stderr
        ) from expired
    if process.returncode != 0:
        raise RunFailed(
            f"{' '.join(command)} exited {process.returncode}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            process.returncode,
            stdout,
            stderr,
        )
    return stdout


def _read(stdout: str, out: Path) -> Run:
    losses = [float(value) for _, value in STEP_LOSS.findall(stdout)]
    state = torch.load(out, map_location="cpu") if out.exists() else {}
    return Run(stdout, losses, state)


def run_original(
    script: Path, workdir: Path, *args: str, timeout: float = TIMEOUT
) -> Run:
    out = workdir / f"{script.stem}.original.pt"
    stdout = _run(
        [sys.executable, str(script), "--out", str(out), *args], workdir, timeout
    )
    return _read(stdout, out)


_MIGRATIONS: dict[tuple[str, bytes], MigrationResult] = {}
_MIGRATIONS_LOCK = threading.Lock()


def migration(script: Path) -> MigrationResult:
    """The codemod's result for ``script``, computed once per test process: several
    checks (and suites) run the same script, and a full pass costs seconds of CPU.
    Keyed on the bytes too, so a script edited between calls is migrated again."""
    source = script.read_bytes()
    key = (str(script), source)
    with _MIGRATIONS_LOCK:
        found = _MIGRATIONS.get(key)
    if found is None:
        found = migrate_source(source, str(script))
        with _MIGRATIONS_LOCK:
            _MIGRATIONS[key] = found
    return found


def migrate_to(script: Path, workdir: Path) -> Path:
    result = migration(script)
    assert result.changed, f"{script.name}: nothing was migrated"
    target = workdir / f"{script.stem}_migrated.py"
    target.write_bytes(
        result.output if isinstance(result.output, bytes) else result.output.encode()
    )
    return target


def run_launched(
    script: Path,
    workdir: Path,
    nproc: int,
    *args: str,
    launch: tuple[str, ...] = (),
    timeout: float = TIMEOUT,
    memory_limit: int | None = None,
) -> Run:
    out = workdir / f"{script.stem}.w{nproc}.{'-'.join(launch) or 'default'}.pt"
    command = [
        sys.executable,
        "-m",
        "accel_migrate",
        "launch",
        "--nproc",
        str(nproc),
        *launch,
    ]
    stdout = _run(
        [*command, str(script), "--out", str(out), *args],
        workdir,
        timeout,
        memory_limit,
    )
    return _read(stdout, out)


def relative_errors(expected: list[float], actual: list[float]) -> list[float]:
    assert len(expected) == len(actual), f"{len(expected)} steps vs {len(actual)}"
    assert expected, "no losses were printed"
    return [
        abs(a - e) / max(abs(e), 1e-12) for e, a in zip(expected, actual, strict=True)
    ]


def max_parameter_error(
    expected: dict[str, torch.Tensor], actual: dict[str, torch.Tensor]
) -> float:
    assert (
        expected.keys() == actual.keys()
    ), f"keys differ: {sorted(expected)} vs {sorted(actual)}"
    worst = 0.0
    for name, tensor in expected.items():
        other = actual[name].to(tensor.dtype)
        scale = tensor.abs().max().clamp_min(1e-12)
        worst = max(worst, float((other - tensor).abs().max() / scale))
    return worst
