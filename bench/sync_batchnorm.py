"""What BatchNorm of the global batch costs per step (``runtime/sync_batchnorm.py``).

    python bench/sync_batchnorm.py [--rounds 3] [--steps 30]

``workloads/train_bn_cnn.py`` (4 convolutions, a BatchNorm2d after each),
migrated by the current codemod, under ``accel-migrate launch`` at world 2:
synchronised BatchNorm (the default) against ``--no-sync-batchnorm`` (each
process normalises by its own samples), under DDP and FSDP. CPU: gloo, one
thread per rank; CUDA (where there are at least 2 devices): NCCL, a wider model.
Synchronising costs one all-gather per BatchNorm layer in forward and one
all-reduce in backward. Runs are interleaved and each round's pair gives a ratio;
the table has the medians.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from _common import (
    WORKLOADS,
    Contender,
    cuda_devices,
    launch,
    load,
    median_step,
    ms,
    paired_ratio,
    run_rounds,
    spread,
    table,
    workdir,
)

WARMUP = 10
WORKLOAD = WORKLOADS / "train_bn_cnn.py"
CPU_MODEL = ["--width", "32", "--blocks", "4", "--size", "16", "--batch-size", "64"]
CUDA_MODEL = ["--width", "128", "--blocks", "8", "--size", "32", "--batch-size", "256"]


def migrate(folder: Path) -> Path:
    from accel_migrate.codemod import migrate_source

    result = migrate_source(WORKLOAD.read_bytes(), str(WORKLOAD))
    if not result.changed:
        raise SystemExit(f"the codemod left {WORKLOAD} unchanged; nothing to compare")
    output = result.output
    target = folder / "train_bn_cnn_migrated.py"
    target.write_bytes(output if isinstance(output, bytes) else output.encode())
    return target


def contenders(world: int, migrated: Path, args: list[str]) -> list[Contender]:
    found = []
    for strategy in ("ddp", "fsdp"):
        for synced in (True, False):
            starter = launch(world, strategy)
            if not synced:
                starter.append("--no-sync-batchnorm")
            name = (
                f"{strategy.upper()}, {'sync' if synced else 'per-process'} BatchNorm"
            )
            found.append(Contender(name, starter, migrated, args))
    return found


def rows_for(setting: str, group: list[Contender]) -> list[list[str]]:
    rows = []
    for synced, local in zip(group[::2], group[1::2], strict=True):
        for contender in (synced, local):
            if contender.skipped:
                rows.append([setting, contender.name, contender.note, "", "", ""])
                continue
            low, high = spread(contender, WARMUP)
            cost = ""
            if contender is synced and not local.skipped:
                ratio = paired_ratio(synced, local, WARMUP)
                added = median_step(synced, WARMUP) - median_step(local, WARMUP)
                cost = f"{ratio:.3f} ({added * 1e3:+.2f} ms/step)"
            rows.append(
                [
                    setting,
                    contender.name,
                    ms(median_step(contender, WARMUP)),
                    f"{ms(low)}-{ms(high)}",
                    ms(median_step(contender, WARMUP, "step_cpu")),
                    cost,
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30, help="steps per epoch")
    parser.add_argument("--no-cpu", action="store_true", help="CUDA only")
    options = parser.parse_args(argv)
    started = load()
    rows: list[list[str]] = []
    epochs = ["--steps-per-epoch", str(options.steps), "--epochs", "2"]
    with workdir() as folder:
        migrated = migrate(folder)
        if not options.no_cpu:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            group = contenders(2, migrated, [*CPU_MODEL, *epochs])
            run_rounds(group, options.rounds, folder)
            rows += rows_for("CPU gloo, world 2", group)
            if visible is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = visible
        devices = cuda_devices()
        if devices >= 2:
            group = contenders(2, migrated, [*CUDA_MODEL, *epochs])
            run_rounds(group, options.rounds, folder)
            rows += rows_for("CUDA NCCL, world 2", group)
    print(
        table(
            f"Synchronised BatchNorm, step time (median of {options.rounds} rounds; "
            f"load {started} at start, {load()} at end)",
            ["setting", "run", "step", "spread", "CPU/step", "sync / per-process"],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
