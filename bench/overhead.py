"""Runtime overhead at world 1: the migrated script's step time over the original's.

    python bench/overhead.py [--rounds 5] [--steps 30]

Same model, data and loop (``workloads/train_mlp.py`` and its migration by the
current codemod), every process on one thread. Each run trains two epochs; the
first steps are discarded as warm-up and the run's median step time kept. The
rounds interleave the contenders; a contender's step time is the median over the
rounds, and its ratio the median over the rounds of its run against the
original's run of the same round. Target: at most 1.02, as a plain script and
under ``accel-migrate launch --nproc 1`` (which shards the loader and so runs the
runtime's data path).

The CPU time per step (all the process's threads) is shown too: other processes
on a busy machine stretch the wall time, much less that. And a tiny MLP (a step
of well under a millisecond) measures the runtime's fixed cost per step directly,
in microseconds, which no amount of noise in the big model's tens of
milliseconds can hide.
"""

from __future__ import annotations

import argparse

from _common import (
    ORIGINAL,
    THREADS,
    Contender,
    launch,
    load,
    median_step,
    migrate_workload,
    ms,
    paired_ratio,
    run_rounds,
    single,
    spread,
    table,
    verdict,
    workdir,
)

WARMUP = 10
TARGET = 1.02
TINY = ["--features", "16", "--hidden", "16", "--layers", "1", "--batch-size", "16"]


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} us"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30, help="steps per epoch")
    options = parser.parse_args(argv)
    args = ["--steps-per-epoch", str(options.steps), "--epochs", "2"]
    tiny = [*TINY, "--steps-per-epoch", "300", "--epochs", "2"]

    started_load = load()
    with workdir() as folder:
        migrated = migrate_workload(folder)
        big = [
            Contender("original: `python train_mlp.py`", single(), ORIGINAL, args),
            Contender("migrated: `python train_mlp.py`", single(), migrated, args),
            Contender(
                "migrated: `accel-migrate launch --nproc 1`", launch(1), migrated, args
            ),
        ]
        small = [
            Contender("original: `python train_mlp.py`", single(), ORIGINAL, tiny),
            Contender(
                "migrated: `accel-migrate launch --nproc 1`", launch(1), migrated, tiny
            ),
        ]
        run_rounds([*big, *small], options.rounds, folder)

    rows = []
    base = big[0]
    for contender in big:
        if contender.skipped:
            rows.append(["MLP 2.6 M", contender.name, contender.note, *[""] * 7])
            continue
        step = median_step(contender, WARMUP)
        low, high = spread(contender, WARMUP)
        row = [
            "MLP 2.6 M",
            contender.name,
            ms(step),
            f"{ms(low)}-{ms(high)}",
            ms(median_step(contender, WARMUP, "step_cpu")),
        ]
        if contender is base or base.skipped:
            rows.append([*row, "1", "1", "", "", ""])
            continue
        ratio = paired_ratio(contender, base, WARMUP)
        cpu_ratio = paired_ratio(contender, base, WARMUP, "step_cpu")
        rows.append(
            [
                *row,
                f"{ratio:.3f}",
                f"{cpu_ratio:.3f}",
                f"<= {TARGET}",
                verdict(ratio <= TARGET),
                "",
            ]
        )
    tiny_base, tiny_migrated = small
    for contender in small:
        if contender.skipped:
            rows.append(["tiny MLP", contender.name, contender.note, *[""] * 7])
            continue
        cpu = median_step(contender, WARMUP, "step_cpu")
        low, high = spread(contender, WARMUP)
        extra = ""
        if contender is tiny_migrated and not tiny_base.skipped and not base.skipped:
            added = cpu - median_step(tiny_base, WARMUP, "step_cpu")
            share = added / median_step(base, WARMUP, "step_cpu")
            extra = f"runtime adds {added * 1e6:+.0f} us/step = {share:+.2%} of the 2.6 M step"
        rows.append(
            [
                "tiny MLP",
                contender.name,
                us(median_step(contender, WARMUP)),
                f"{us(low)}-{us(high)}",
                us(cpu),
                "",
                "",
                "",
                "",
                extra,
            ]
        )
    steps = 2 * options.steps
    print(
        table(
            f"Runtime overhead at world 1 ({THREADS} thread per process; median of "
            f"{options.rounds} runs, {steps - 1 - WARMUP} timed steps each (tiny: "
            f"{599 - WARMUP}); load {started_load}-{load()})",
            [
                "model",
                "script",
                "step (wall)",
                "run medians",
                "CPU per step",
                "ratio (wall)",
                "ratio (CPU)",
                "target (wall)",
                "met",
                "note",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
