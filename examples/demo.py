"""The demo behind `make demo`: migrate the bundled single-GPU example, train the
original on one process and the migrated copy on two, and compare their losses."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_cnn.py"
WORK = ROOT / "demo-out"
LOSS = re.compile(r"^epoch (\d+) step (\d+) loss ([0-9.eE+-]+)$", re.MULTILINE)
TOLERANCE = 1e-5
console = Console(highlight=False)


def cli(*args: str, capture: bool = False) -> str:
    command = [sys.executable, "-m", "accel_migrate", *args]
    console.rule(f"[bold]$ accel-migrate {' '.join(args)}")
    done = subprocess.run(
        command, cwd=ROOT, text=True, capture_output=capture, check=False
    )
    if capture and done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
    if done.returncode not in (0, 1):
        sys.exit(f"accel-migrate {args[0]} failed with exit code {done.returncode}")
    return done.stdout if capture else ""


def main() -> int:
    WORK.mkdir(exist_ok=True)
    script = WORK / "train.py"
    shutil.copyfile(EXAMPLE, script)
    relative = str(script.relative_to(ROOT))

    cli(relative)  # the diff and the findings; nothing written
    cli(relative, "--write")

    console.rule("[bold]$ python examples/train_cnn.py   (the original, one process)")
    original = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        cwd=ROOT,
        text=True,
        capture_output=True,
        check=True,
    ).stdout
    console.print(original, end="")
    migrated = cli("launch", "--nproc", "2", relative, capture=True)
    console.print(migrated, end="")

    before = {(int(e), int(s)): float(v) for e, s, v in LOSS.findall(original)}
    after = {(int(e), int(s)): float(v) for e, s, v in LOSS.findall(migrated)}
    table = Table(
        title="training loss: original (1 process) vs migrated (2 processes, DDP over gloo)"
    )
    for column in ("epoch", "step", "original", "migrated", "relative error"):
        table.add_column(column, justify="right")
    worst = 0.0
    for key in sorted(before):
        if key not in after:
            continue
        error = abs(after[key] - before[key]) / max(abs(before[key]), 1e-12)
        worst = max(worst, error)
        table.add_row(
            str(key[0]),
            str(key[1]),
            f"{before[key]:.8f}",
            f"{after[key]:.8f}",
            f"{error:.1e}",
        )
    console.print(table)
    same = before.keys() == after.keys() and worst < TOLERANCE
    verdict = "[green]same losses" if same else "[red]losses differ"
    console.print(
        f"{verdict}[/]: {len(before)} steps, worst relative error {worst:.1e} (tolerance {TOLERANCE:g})"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
