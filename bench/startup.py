"""Start-up cost: what ``import accel_migrate.runtime`` adds to ``import torch``,
against ``accelerate`` and ``lightning_fabric``; and how fast ``accel-migrate
--help`` answers.

    python bench/startup.py [--repeat 10]

Every measurement is a fresh interpreter; the median over the repetitions is
reported, after one discarded run that also writes the bytecode caches (the state
of any installed package: this sandbox sets PYTHONDONTWRITEBYTECODE, which would
otherwise make every run compile the sources). Imports are timed inside the
process (``time.perf_counter`` around ``import torch``, then around the
package), so interpreter start-up does not blur the difference. ``--help`` is
timed from outside, as a user waits for it, through the installed entry point.

Targets: the runtime adds at most 30 ms to ``import torch``; ``accel-migrate
--help`` answers in under 150 ms and imports neither torch nor libcst.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PYTHON, ROOT, accelerate_python, child_environment, table, verdict

IMPORT_TARGET = 0.030
HELP_TARGET = 0.150
HEAVY = ("torch", "libcst", "rich", "click")

PROBE = """
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import {module}
t2 = time.perf_counter()
import json, sys
print(json.dumps({{"torch": t1 - t0, "package": t2 - t1,
                  "loaded": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def environment() -> dict[str, str]:
    env = child_environment()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def probe(python: str, module: str) -> dict[str, object] | None:
    done = subprocess.run(
        [python, "-c", PROBE.format(module=module, heavy=HEAVY)],
        capture_output=True,
        text=True,
        env=environment(),
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        command, capture_output=True, env=environment(), cwd=ROOT, check=False
    )
    return time.perf_counter() - start


def help_imports(entry: Path) -> list[str]:
    """The heavy packages ``accel-migrate --help`` imports (from ``-X importtime``)."""
    done = subprocess.run(
        [PYTHON, "-X", "importtime", str(entry), "--help"],
        capture_output=True,
        text=True,
        env=environment(),
        cwd=ROOT,
        check=False,
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    return [m for m in HEAVY if m in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    options = parser.parse_args(argv)

    accelerate, why = accelerate_python()
    packages: list[tuple[str, str | None, str, str]] = [
        ("accel_migrate.runtime", PYTHON, "", "this environment"),
        ("accelerate", accelerate, why, "bench/.venv-accelerate"),
        ("lightning_fabric", accelerate, why, "bench/.venv-accelerate"),
    ]
    samples: dict[str, list[dict[str, object]]] = {name: [] for name, *_ in packages}
    notes: dict[str, str] = {}
    for name, python, note, _where in packages:
        if python is None:
            notes[name] = note
        elif probe(python, name) is None:  # warm-up, writes bytecode caches
            notes[name] = f"skipped: {name} is not installed there"
    for _ in range(options.repeat):
        for name, python, *_ in packages:
            if name not in notes and python is not None:
                result = probe(python, name)
                if result is not None:
                    samples[name].append(result)

    rows = []
    for name, _python, _note, where in packages:
        if name in notes or not samples[name]:
            rows.append(
                [f"`import {name}`", where, notes.get(name, "failed"), "", "", ""]
            )
            continue
        torch_s = statistics.median(float(s["torch"]) for s in samples[name])  # type: ignore[arg-type]
        added = statistics.median(float(s["package"]) for s in samples[name])  # type: ignore[arg-type]
        ours = name == "accel_migrate.runtime"
        loaded = [m for m in samples[name][0]["loaded"] if m != "torch"]  # type: ignore[union-attr]
        rows.append(
            [
                f"`import {name}` after `import torch`",
                where,
                f"+{added * 1e3:.1f} ms (torch itself: {torch_s * 1e3:.0f} ms)",
                f"<= {IMPORT_TARGET * 1e3:.0f} ms" if ours else "",
                verdict(added <= IMPORT_TARGET) if ours else "",
                ("also imports: " + ", ".join(loaded)) if loaded else "",
            ]
        )

    entry = Path(PYTHON).parent / "accel-migrate"
    if entry.exists():
        wall([str(entry), "--help"])  # warm-up
        bare = statistics.median(
            wall([PYTHON, "-c", "pass"]) for _ in range(options.repeat)
        )
        helps = statistics.median(
            wall([str(entry), "--help"]) for _ in range(options.repeat)
        )
        heavy = [m for m in help_imports(entry) if m in ("torch", "libcst")]
        rows.append(
            [
                "`accel-migrate --help` (wall time)",
                "this environment",
                f"{helps * 1e3:.0f} ms (`python -c pass`: {bare * 1e3:.0f} ms)",
                f"< {HELP_TARGET * 1e3:.0f} ms, no torch/libcst",
                verdict(helps < HELP_TARGET and not heavy),
                ("imports: " + ", ".join(heavy)) if heavy else "imports neither",
            ]
        )
    else:
        rows.append(
            ["`accel-migrate --help`", str(entry), "failed: no entry point", "", "", ""]
        )

    print(
        table(
            f"Start-up (fresh interpreters, median of {options.repeat}, bytecode cached)",
            ["what", "environment", "time", "target", "met", "note"],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
