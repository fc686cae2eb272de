"""What the benchmarks share: the workload, how a contender is started and timed,
the Accelerate environment, statistics and the table format.

Every contender runs in fresh processes through ``workloads/_timed.py``, which
records the end of every optimizer step, the peak RSS and the bytes each rank
holds. The migrated script is produced from ``workloads/train_mlp.py`` by the
current codemod each time a benchmark runs, so the numbers are those of the code
in this tree.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
WORKLOADS = BENCH / "workloads"
TIMED = WORKLOADS / "_timed.py"
ORIGINAL = WORKLOADS / "train_mlp.py"
ACCELERATE_VENV = BENCH / ".venv-accelerate"
PYTHON = sys.executable

#: Each process computes on this many threads. torchrun gives every rank of a
#: multi-process job OMP_NUM_THREADS=1; single-process runs get the same, so a
#: comparison never pits one thread against two.
THREADS = 1

RUN_TIMEOUT = 300

# Variables that would make a child believe it is part of some other job.
_FOREIGN = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_ERROR_FILE",
    "ACCELERATE_USE_CPU",
    "ACCELERATE_USE_FSDP",
)


def child_environment(threads: int = THREADS, **extra: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _FOREIGN and not key.startswith("ACCEL_MIGRATE_")
    }
    env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONHASHSEED"] = "0"
    env.update(extra)
    return env


# -- the migrated workload ------------------------------------------------------------------
def migrate_workload(folder: Path) -> Path:
    """``train_mlp.py`` as the current codemod rewrites it."""
    from accel_migrate.codemod import migrate_source

    result = migrate_source(ORIGINAL.read_bytes(), str(ORIGINAL))
    if not result.changed:
        raise SystemExit(f"the codemod left {ORIGINAL} unchanged; nothing to compare")
    output = result.output
    target = folder / "train_mlp_migrated.py"
    target.write_bytes(output if isinstance(output, bytes) else output.encode())
    return target


@contextmanager
def workdir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="accel-migrate-bench-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- contenders -------------------------------------------------------------------------------
def single(python: str = PYTHON) -> list[str]:
    """One plain process: ``python script.py``."""
    return [python]


def launch(
    nproc: int, strategy: str = "auto", precision: str = "fp32", python: str = PYTHON
) -> list[str]:
    """``accel-migrate launch`` (torchrun underneath), in ``python``'s environment."""
    return [
        python,
        "-m",
        "accel_migrate",
        "launch",
        "--nproc",
        str(nproc),
        "--strategy",
        strategy,
        "--precision",
        precision,
    ]


def torchrun(nproc: int, python: str = PYTHON) -> list[str]:
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
    ]


@dataclass
class Contender:
    name: str
    starter: list[str] | None  # None: skipped, `note` says why
    target: Path | None = None
    args: list[str] = field(default_factory=list)
    note: str = ""
    #: Filled in by `run`: one list of per-rank reports per run.
    runs: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def skipped(self) -> bool:
        return self.starter is None or self.target is None

    def skip(self, why: str) -> None:
        self.starter, self.note = None, why


#: How torchrun reports a rank that aborted: with torch 2.13 a gloo job, even a
#: plain hand-written DDP script, now and then aborts at exit ("terminate called
#: without an active exception") on this kind of machine. Such a run is run again,
#: once, rather than losing the contender for the whole table.
_ABORTED = "exitcode: -6"


def run(contender: Contender, folder: Path, threads: int = THREADS) -> None:
    """Run the contender once; append its per-rank reports, or mark it skipped."""
    if contender.skipped:
        return
    if not _run_once(contender, folder, threads, retry_abort=True):
        print(f"--- {contender.name}: aborted at exit; run again", file=sys.stderr)
        _run_once(contender, folder, threads, retry_abort=False)


def _run_once(
    contender: Contender, folder: Path, threads: int, *, retry_abort: bool
) -> bool:
    """False when the run aborted at exit and may be retried; True otherwise."""
    assert contender.starter is not None and contender.target is not None
    tag = f"run{time.monotonic_ns()}"
    report = folder / f"{tag}.json"
    env = child_environment(
        threads, BENCH_TARGET=str(contender.target), BENCH_REPORT=str(report)
    )
    command = [*contender.starter, str(TIMED), *contender.args]
    try:
        done = subprocess.run(
            command,
            cwd=WORKLOADS,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        contender.skip(f"failed: no result within {RUN_TIMEOUT} s")
        return True
    for line in done.stdout.splitlines():
        if line.startswith("UNSUPPORTED:"):
            contender.skip("skipped: " + line.removeprefix("UNSUPPORTED:").strip())
            return True
    reports = sorted(folder.glob(f"{tag}.rank*.json"))
    if done.returncode != 0 and retry_abort and _ABORTED in done.stderr:
        return False
    if done.returncode != 0 or not reports:
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        errors = [line for line in lines if "Error" in line or "error:" in line]
        contender.skip(f"failed: exit {done.returncode}: {(errors or lines)[-1][:160]}")
        print(f"--- {contender.name} failed: {' '.join(command)}", file=sys.stderr)
        print("\n".join(lines[-40:]), file=sys.stderr)
        return True
    contender.runs.append(
        sorted((json.loads(p.read_text()) for p in reports), key=lambda r: r["rank"])
    )
    return True


def run_rounds(contenders: Sequence[Contender], rounds: int, folder: Path) -> None:
    """Interleave the contenders (A B C, A B C, ...) so drift hits all alike."""
    for _ in range(rounds):
        for contender in contenders:
            run(contender, folder)


# -- statistics ---------------------------------------------------------------------------------
def step_times(
    report: dict[str, Any], warmup: int, clock: str = "step_ends"
) -> list[float]:
    ends = report[clock]
    return [b - a for a, b in itertools.pairwise(ends)][warmup:]


def run_step_time(
    reports: list[dict[str, Any]], warmup: int, clock: str = "step_ends"
) -> float:
    """The run's median step time: rank 0's (ranks move in lockstep).

    ``clock``: ``step_ends`` for wall time, ``step_cpu`` for the process's CPU time.
    """
    times = step_times(reports[0], warmup, clock)
    if not times:
        raise ValueError("no timed steps after the warm-up")
    return statistics.median(times)


def median_step(contender: Contender, warmup: int, clock: str = "step_ends") -> float:
    return statistics.median(run_step_time(r, warmup, clock) for r in contender.runs)


def paired_ratio(
    contender: Contender, reference: Contender, warmup: int, clock: str = "step_ends"
) -> float:
    """Median over the rounds of contender / reference, each round's runs paired.

    The two ran seconds apart in every round, so a slow drift in how busy the
    machine is cancels out of each round's ratio.
    """
    ratios = [
        run_step_time(mine, warmup, clock) / run_step_time(theirs, warmup, clock)
        for mine, theirs in zip(contender.runs, reference.runs, strict=False)
    ]
    return statistics.median(ratios)


def spread(contender: Contender, warmup: int) -> tuple[float, float]:
    values = [run_step_time(r, warmup) for r in contender.runs]
    return min(values), max(values)


def load() -> str:
    """The 1-minute load average: how busy the machine was (other processes)."""
    return f"{os.getloadavg()[0]:.1f}"


# -- the Accelerate environment -----------------------------------------------------------------
def _torch_version() -> str:
    return metadata.version("torch").split("+")[0]


def accelerate_python(install: bool = True) -> tuple[str | None, str]:
    """The Python of the Accelerate environment, or None and why.

    The environment is ``bench/.venv-accelerate``: the same torch as this one,
    plus ``accelerate`` (and ``lightning-fabric``, for the start-up comparison,
    where it installs). Created on first use unless BENCH_NO_INSTALL is set.
    """
    python = ACCELERATE_VENV / "bin" / "python"
    if not python.exists():
        if not install or os.environ.get("BENCH_NO_INSTALL"):
            return None, f"skipped: no {ACCELERATE_VENV.relative_to(ROOT)}"
        why = _create_accelerate_env(python)
        if why:
            return None, why
    check = subprocess.run(
        [str(python), "-c", "import accelerate; print(accelerate.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if check.returncode != 0:
        return None, "skipped: accelerate does not import in its environment"
    return str(python), f"accelerate {check.stdout.strip()}"


def _create_accelerate_env(python: Path) -> str:
    print(
        f"(setting up {ACCELERATE_VENV.relative_to(ROOT)}: torch=={_torch_version()} "
        f"+ accelerate; once)",
        file=sys.stderr,
        flush=True,
    )
    steps = [
        [PYTHON, "-m", "venv", str(ACCELERATE_VENV)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            f"torch=={_torch_version()}",
            "accelerate",
        ],
    ]
    for step in steps:
        try:
            done = subprocess.run(
                step, capture_output=True, text=True, timeout=900, check=False
            )
        except subprocess.TimeoutExpired:
            done = None
        if done is None or done.returncode != 0:
            shutil.rmtree(ACCELERATE_VENV, ignore_errors=True)
            last = (
                (done.stderr.strip().splitlines() or ["?"])[-1] if done else "timeout"
            )
            return f"skipped: could not install accelerate ({last[:120]})"
    # Optional, for the start-up table only.
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "lightning-fabric"],
        capture_output=True,
        timeout=900,
        check=False,
    )
    return ""


# -- output ---------------------------------------------------------------------------------------
def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"torch {metadata.version('torch')}"
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def mib(size: float) -> str:
    return f"{size / 2**20:.1f}"


def verdict(ok: bool) -> str:
    return "yes" if ok else "**no**"


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table: readable in a terminal, pasted as is into the docs."""
    cells = [[str(c) for c in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return (
            "| "
            + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
            + " |"
        )

    out = [f"### {title}", "", line(cells[0])]
    out.append("| " + " | ".join("-" * w for w in widths) + " |")
    out += [line(row) for row in cells[1:]]
    return "\n".join(out)


def cuda_devices() -> int:
    """How many CUDA devices the benchmark may use (0: none)."""
    probe = subprocess.run(
        [
            PYTHON,
            "-c",
            "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        return int(probe.stdout.strip() or 0)
    except ValueError:
        return 0
