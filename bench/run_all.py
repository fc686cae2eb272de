"""Run every benchmark, one after the other, and say how long it all took.

    make bench                # or: python bench/run_all.py [--only NAME ...]

Each benchmark is its own script under ``bench/`` and prints one Markdown table
(pasted as is into docs/performance.md). They run in separate processes, so one
that fails does not stop the others; this script exits non-zero only if one does.
The Accelerate environment (``bench/.venv-accelerate``) is set up first, once;
the codemod benchmark sets up TorchFix's (``bench/.venv-torchfix``) on first use.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

from _common import BENCH, PYTHON, accelerate_python, machine

#: In the order they run. codemod_throughput.py is maintained separately and runs
#: when it is there.
BENCHMARKS = ["overhead", "distributed", "startup", "memory", "codemod_throughput"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=BENCHMARKS, default=None)
    parser.add_argument(
        "--timeout",
        type=int,
        default=600,
        help="seconds one benchmark may run before it is stopped (default 600)",
    )
    options = parser.parse_args(argv)
    chosen = options.only or BENCHMARKS

    started = time.perf_counter()
    print(f"machine: {machine()}")
    print(f"load average at start: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    setup = time.perf_counter()
    _python, accelerate = accelerate_python()
    print(f"accelerate: {accelerate} ({time.perf_counter() - setup:.0f} s)\n")
    sys.stdout.flush()

    failed = []
    for name in chosen:
        script = BENCH / f"{name}.py"
        if not script.exists():
            print(
                f"({name}: {script.relative_to(BENCH.parent)} is not there; skipped)\n"
            )
            continue
        begun = time.perf_counter()
        # Its own process group, so that a stopped benchmark takes its torchrun
        # jobs with it.
        process = subprocess.Popen(
            [PYTHON, str(script)], cwd=BENCH.parent, start_new_session=True
        )
        try:
            code: int | None = process.wait(timeout=options.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        except KeyboardInterrupt:
            os.killpg(process.pid, signal.SIGKILL)
            raise
        took = time.perf_counter() - begun
        status = (
            ""
            if code == 0
            else (
                f", stopped after {options.timeout} s"
                if code is None
                else f", exit {code}"
            )
        )
        print(f"\n({name}: {took:.0f} s{status})\n", flush=True)
        if code != 0:
            failed.append(name)

    total = time.perf_counter() - started
    print(f"load average at end: {', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"all benchmarks: {total:.0f} s ({total / 60:.1f} min)")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
