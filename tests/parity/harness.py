"""Run a fixture script as the original (one process) and migrated (under
``accel-migrate launch``), and read back its losses and final parameters.

Fixture convention: the script prints ``... loss <float>`` once per optimizer step
and takes ``--out PATH`` to save its final state dict with ``torch.save``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from accel_migrate.codemod import migrate_source

STEP_LOSS = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)
TIMEOUT = 180


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


def _run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(
        command,
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
    return done.stdout


def _read(stdout: str, out: Path) -> Run:
    losses = [float(value) for _, value in STEP_LOSS.findall(stdout)]
    state = torch.load(out, map_location="cpu") if out.exists() else {}
    return Run(stdout, losses, state)


def run_original(script: Path, workdir: Path, *args: str) -> Run:
    out = workdir / f"{script.stem}.original.pt"
    stdout = _run([sys.executable, str(script), "--out", str(out), *args], workdir)
    return _read(stdout, out)


def migrate_to(script: Path, workdir: Path) -> Path:
    result = migrate_source(script.read_bytes(), str(script))
    assert result.changed, f"{script.name}: nothing was migrated"
    target = workdir / f"{script.stem}_migrated.py"
    target.write_bytes(
        result.output if isinstance(result.output, bytes) else result.output.encode()
    )
    return target


def run_launched(
    script: Path, workdir: Path, nproc: int, *args: str, launch: tuple[str, ...] = ()
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
    stdout = _run([*command, str(script), "--out", str(out), *args], workdir)
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
