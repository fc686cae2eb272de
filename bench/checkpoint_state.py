"""``accel.save_state`` / ``accel.load_state`` under FSDP: the sharded format (DCP,
each rank writes its own shards) against the gathered one (full state dicts to
rank 0, one file), time and bytes written per rank.

    python bench/checkpoint_state.py [--worlds 2 4] [--rounds 3] [--blocks 8] [--width 1024]

Each (world, format) is one job of ``workloads/save_state_timed.py`` under
``accel-migrate launch --strategy fsdp`` (CPU: gloo, one thread per rank), which
saves and loads ``--rounds`` times into a fresh temporary folder; the table has the
medians. Not part of ``make bench`` (its 10-minute budget).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess

from _common import WORKLOADS, child_environment, launch, load, table, workdir

WORKLOAD = WORKLOADS / "save_state_timed.py"


def mib(size: float) -> str:
    return f"{size / 2**20:.1f}"


def run(world: int, layout: str, options: argparse.Namespace) -> dict:
    with workdir() as folder:
        out = folder / "out.json"
        command = [
            *launch(world, "fsdp"),
            str(WORKLOAD),
            str(folder),
            str(out),
            layout,
            str(options.rounds),
            str(options.blocks),
            str(options.width),
        ]
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            env=child_environment(),
        )
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--width", type=int, default=1024)
    options = parser.parse_args(argv)
    rows, start_load, state = [], load(), 0
    for world in options.worlds:
        for layout in ("sharded", "gathered"):
            result = run(world, layout, options)
            state = result["state_bytes"]
            written = result["bytes"]
            rows.append(
                [
                    world,
                    layout,
                    f"{statistics.median(result['saves']):.3f}",
                    f"{statistics.median(result['loads']):.3f}",
                    mib(written[0]),
                    mib(max(written[1:], default=0)),
                    mib(sum(written)),
                ]
            )
    print(
        table(
            f"save_state / load_state under FSDP, model + Adam state {mib(state)} MiB "
            f"(median of {options.rounds}; load {start_load}-{load()})",
            [
                "world",
                "format",
                "save s",
                "load s",
                "rank 0 writes MiB",
                "other rank writes MiB (max)",
                "all ranks MiB",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
