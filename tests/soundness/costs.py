"""Where a corpus case's CPU goes: each case classified as the harness classifies it
(``corpus.classify``), one after another, with the CPU seconds of each phase.

The phases: ``migrate`` (the codemod: in this process for file mode, the CLI's own
process for batch mode), ``original`` (the script on one process, both runs of a
``second-run`` case), ``launch`` (``accel-migrate launch --nproc 2``: the launcher
and its two workers), ``compare`` (the comparison in this process) and, where an
info finding names stochastic layers, ``deterministic`` (verify's runner, both
runs again). A phase's CPU is this thread's (``RUSAGE_THREAD``), its waited
children's (``RUSAGE_CHILDREN``: a batch migration's CLI, the shims) and that of
the commands the warm interpreter ran for it (tests/warm_python.py forks them from
its server, so they are not this process's children: each writes its ``wait4``
CPU to ``ACCEL_MIGRATE_TEST_WARM_CPU``). CPU seconds, unlike wall time, hardly
move with the machine's load. Not a test; a measurement:

    PYTHONPATH=$PWD python -m tests.soundness.costs CASE [CASE ...]
    ... --sample 40      # every n-th CI case, 40 in all
    ... --json out.json  # each case's phases, for comparing two commits
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import corpus
from .cases import discover

PHASES = {
    "migrate_case": "migrate",
    "run_original": "original",
    "_launch": "launch",
    "differences": "compare",
    "written_differences": "compare",
    "_deterministic_differences": "deterministic",
}


class Meter:
    """CPU seconds per phase, for one case at a time (a phase called inside another,
    the comparison of the deterministic runs, counts as the outer one)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.phases: dict[str, float] = defaultdict(float)
        self.depth = 0

    def _warm(self) -> float:
        if not self.log.exists():
            return 0.0
        return sum(float(line.split("\t")[0]) for line in self.log.open())

    def _now(self) -> float:
        own = resource.getrusage(resource.RUSAGE_THREAD)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (
            own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
        ) + self._warm()

    def wrap(self, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def measured(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return function(*args, **kwargs)
            start = self._now()
            self.depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                self.depth -= 1
                self.phases[phase] += self._now() - start

        return measured


def measure(names: list[str]) -> list[dict[str, Any]]:
    cases = {c.name: c for c in discover()}
    results = []
    with tempfile.TemporaryDirectory(prefix="soundness-costs-") as tmp:
        log = Path(tmp) / "warm-cpu.tsv"
        os.environ["ACCEL_MIGRATE_TEST_WARM_CPU"] = str(log)
        meter = Meter(log)
        for attribute, phase in PHASES.items():
            setattr(corpus, attribute, meter.wrap(phase, getattr(corpus, attribute)))
        for name in names:
            meter.phases = defaultdict(float)
            start = time.perf_counter()
            outcome = corpus.classify(cases[name], Path(tmp))
            wall = time.perf_counter() - start
            phases = {k: round(v, 2) for k, v in meter.phases.items()}
            row = dict(name=name, klass=outcome.klass, detail=outcome.detail)
            row.update(mode=cases[name].mode, wall=round(wall, 1), phases=phases)
            row["cpu"] = round(sum(phases.values()), 2)
            results.append(row)
            shown = " ".join(f"{k} {v:.2f}" for k, v in phases.items())
            print(f"{name}\t{outcome.klass}\t{row['cpu']:.2f}\t{shown}", flush=True)
    return results


def sample(count: int) -> list[str]:
    """Every n-th case CI runs (extended ones and those missing a module left out)."""
    ci = [c.name for c in discover() if not c.extended and not c.missing()]
    step = max(1, len(ci) // count)
    return ci[::step][:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args(argv)
    names = options.cases + (sample(options.sample) if options.sample else [])
    results = measure(names)
    totals: dict[str, float] = defaultdict(float)
    for row in results:
        for phase, seconds in row["phases"].items():
            totals[phase] += seconds
    print(
        f"{len(results)} cases, {sum(totals.values()):.1f} CPU-s: "
        + ", ".join(f"{k} {v:.1f}" for k, v in totals.items())
    )
    if options.json:
        options.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
