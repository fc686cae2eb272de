"""Memory: what the migrated script holds over the original at world 1, and what
FSDP saves over DDP per rank at world 2.

    python bench/memory.py [--rounds 3]

World 1: peak RSS (``getrusage``, the training process) and, where CUDA is used,
peak CUDA memory (``torch.cuda.max_memory_allocated``) of the original and the
migrated script; median over the rounds. Target: at most 5% more.

World 2 (CPU, gloo): the bytes of parameters, gradients and optimizer state each
rank holds after training (local shards for FSDP), for the runtime's DDP and
FSDP and the hand-written loops, on the benchmark MLP (2.6 M parameters, Adam).
Target: FSDP holds about half of DDP's parameter and optimizer memory per rank
(ratio at most 0.55 at world 2). Peak RSS per rank is shown for reference: FSDP
still gathers the whole model for forward and backward (the runtime shards the
model as one group), so its peak moves less than its resident state.

Peak model state (``--part peak``; issue 16): the peak bytes of live tensors per
rank (parameters, gradients, optimizer state, gathered parameters; counted by a
``TorchDispatchMode``, see ``workloads/model_state_peak.py``) of a 12-block model
with Adam, at world 1 (the original) and world 2 and 4 under DDP, root-only FSDP
(``--fsdp-wrap root``) and per-block FSDP; plus ``torch.cuda.max_memory_allocated``
where CUDA is used. Target: per-block FSDP at world W peaks at most (world 1's
peak / W + one block's parameters) x 1.10.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _common import (
    BENCH,
    ORIGINAL,
    PYTHON,
    WORKLOADS,
    Contender,
    child_environment,
    cuda_devices,
    launch,
    mib,
    migrate_workload,
    run_rounds,
    single,
    table,
    torchrun,
    verdict,
    workdir,
)

RSS_TARGET = 1.05
SHARD_TARGET = 0.55
PEAK_TARGET = 1.10
PEAK_WORKLOAD = WORKLOADS / "model_state_peak.py"
PEAK_KINDS = (
    ("DDP", "ddp", []),
    ("FSDP, root only", "fsdp", ["--fsdp-wrap", "root"]),
    ("FSDP, per block", "fsdp", []),
)


def median_of(contender: Contender, read: Any) -> float:
    return statistics.median(read(reports) for reports in contender.runs)


def rss(reports: list[dict[str, Any]]) -> float:
    return max(r["max_rss"] for r in reports)


def cuda_peak(reports: list[dict[str, Any]]) -> float | None:
    peaks = [r["cuda_peak"] for r in reports if r["cuda_peak"] is not None]
    return max(peaks) if peaks else None


def held(reports: list[dict[str, Any]], parts: tuple[str, ...]) -> float:
    """The most any rank holds of ``parts`` (parameters, gradients, optimizer)."""
    return max(sum(r["state"].get(p, 0) for p in parts) for r in reports)


PARAMS_AND_OPTIMIZER = ("parameters", "optimizer")
ALL_STATE = ("parameters", "gradients", "optimizer")


def _peak_run(
    command: list[str], report: Path, world: int
) -> list[dict[str, Any]] | str:
    """Per-rank reports of one run of the peak workload, or why there are none.
    Ranks beyond the GPUs there are run on the CPU (the tracker counts either)."""
    env = child_environment()
    if world > cuda_devices():
        env["CUDA_VISIBLE_DEVICES"] = ""
    mode = "plain" if len(command) == 1 else "runtime"
    done = subprocess.run(
        [*command, str(PEAK_WORKLOAD), mode, str(report)],
        cwd=BENCH.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    found = sorted(report.parent.glob(f"{report.stem}*.json"))
    if done.returncode != 0 or not found:
        lines = done.stderr.strip().splitlines() or ["(no output)"]
        print(
            f"--- {' '.join(command)} failed:", *lines[-30:], sep="\n", file=sys.stderr
        )
        return f"failed: exit {done.returncode}"
    return [json.loads(p.read_text()) for p in found]


def model_state_peaks(folder: Path, worlds: list[int]) -> str:
    """The peak-model-state table: the original at world 1, then each strategy."""
    jobs: dict[tuple[int, str], list[str]] = {(1, "original (no runtime)"): [PYTHON]}
    for world in worlds:
        for name, strategy, flags in PEAK_KINDS:
            jobs[world, name] = [*launch(world, strategy), *flags]
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {
            key: pool.submit(_peak_run, command, folder / f"peak{i}.json", key[0])
            for i, (key, command) in enumerate(jobs.items())
        }
        results = {key: future.result() for key, future in futures.items()}
    base = results[1, "original (no runtime)"]
    rows = []
    for (world, name), reports in results.items():
        if isinstance(reports, str):
            rows.append([world, name, reports, "", "", "", "", "", ""])
            continue
        peak = max(r["peak"] for r in reports)
        cuda = [r["cuda_peak"] for r in reports if r["cuda_peak"] is not None]
        target, ratio, met = "", "", ""
        if not isinstance(base, str):
            one = max(r["peak"] for r in base)
            ratio = f"{peak / one:.3f}"
            if name == "FSDP, per block":
                bound = (one / world + reports[0]["block"]) * PEAK_TARGET
                target = f"<= {mib(bound)} (1/{world} + 1 block, +10%)"
                met = verdict(peak <= bound)
        rows.append(
            [
                world,
                name,
                max(r["units"] for r in reports) or "",
                mib(peak),
                mib(max(r["resident"] for r in reports)),
                mib(max(cuda)) if cuda else "no CUDA",
                ratio,
                target,
                met,
            ]
        )
    block = next((r[0]["block"] for r in results.values() if not isinstance(r, str)), 0)
    return table(
        "Peak model state per rank, 12 blocks + Adam "
        f"(live tensor bytes, largest rank; one block {mib(block)} MiB)",
        [
            "world",
            "strategy",
            "FSDP units",
            "peak MiB",
            "after the last step MiB",
            "peak CUDA MiB",
            "peak / world 1's",
            "target MiB",
            "met",
        ],
        rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--part",
        choices=("all", "resident", "peak"),
        default="all",
        help="resident: the world 1 / world 2 table; peak: the peak model state table",
    )
    parser.add_argument(
        "--worlds", default="2,4", help="worlds of the peak table (comma-separated)"
    )
    options = parser.parse_args(argv)
    if options.part in ("all", "peak"):
        with workdir() as folder:
            worlds = [int(w) for w in options.worlds.split(",")]
            print(model_state_peaks(folder, worlds))
            print()
    if options.part == "peak":
        return 0
    args = ["--steps-per-epoch", "10", "--epochs", "1"]
    cuda = cuda_devices() > 0
    rows = []
    with workdir() as folder:
        migrated = migrate_workload(folder)
        world1 = [
            Contender("original: `python train_mlp.py`", single(), ORIGINAL, args),
            Contender("migrated: `python train_mlp.py`", single(), migrated, args),
            Contender(
                "migrated: `accel-migrate launch --nproc 1`", launch(1), migrated, args
            ),
        ]
        run_rounds(world1, options.rounds, folder)
        base = world1[0]
        for contender in world1:
            if contender.skipped:
                rows.append(
                    ["world 1", contender.name, contender.note, "", "", "", "", ""]
                )
                continue
            peak = median_of(contender, rss)
            ratio = peak / median_of(base, rss) if not base.skipped else None
            gpu = "skipped: no CUDA"
            if cuda:
                values = [cuda_peak(r) for r in contender.runs]
                known = [v for v in values if v is not None]
                gpu = mib(statistics.median(known)) if known else "not used"
                if known and contender is not base and not base.skipped:
                    reference = [cuda_peak(r) for r in base.runs]
                    reference = [v for v in reference if v is not None]
                    if reference:
                        cuda_ratio = statistics.median(known) / statistics.median(
                            reference
                        )
                        gpu += f" (x{cuda_ratio:.3f})"
                        ratio = max(ratio or 0.0, cuda_ratio)
            first = contender is base
            rows.append(
                [
                    "world 1",
                    contender.name,
                    mib(peak),
                    gpu,
                    mib(median_of(contender, lambda r: held(r, ALL_STATE))),
                    "" if first or ratio is None else f"{ratio:.3f}",
                    "" if first else f"peak <= {RSS_TARGET}",
                    "" if first or ratio is None else verdict(ratio <= RSS_TARGET),
                ]
            )

        # World 2 on the CPU: resident state per rank, DDP against FSDP.
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        try:
            world2 = {
                "runtime ddp": Contender(
                    "runtime DDP", launch(2, "ddp"), migrated, args
                ),
                "runtime fsdp": Contender(
                    "runtime FSDP", launch(2, "fsdp"), migrated, args
                ),
                "hand ddp": Contender(
                    "hand-written DDP", torchrun(2), WORKLOADS / "ddp_mlp.py", args
                ),
                "hand fsdp": Contender(
                    "hand-written fully_shard (layers + root)",
                    torchrun(2),
                    WORKLOADS / "fsdp_mlp.py",
                    [*args, "--wrap", "layers"],
                ),
            }
            run_rounds(list(world2.values()), 1, folder)
        finally:
            if visible is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = visible
        pairs = {"runtime fsdp": "runtime ddp", "hand fsdp": "hand ddp"}
        for key, contender in world2.items():
            if contender.skipped:
                rows.append(
                    [
                        "world 2 (CPU)",
                        contender.name,
                        contender.note,
                        "",
                        "",
                        "",
                        "",
                        "",
                    ]
                )
                continue
            state = median_of(contender, lambda r: held(r, ALL_STATE))
            ratio_text, target, met = "", "", ""
            if key in pairs and not world2[pairs[key]].skipped:
                mine = median_of(contender, lambda r: held(r, PARAMS_AND_OPTIMIZER))
                ddp = median_of(
                    world2[pairs[key]], lambda r: held(r, PARAMS_AND_OPTIMIZER)
                )
                ratio = mine / ddp
                ratio_text = f"{ratio:.3f} of DDP's params + optimizer"
                target, met = f"<= {SHARD_TARGET}", verdict(ratio <= SHARD_TARGET)
            rows.append(
                [
                    "world 2 (CPU)",
                    contender.name,
                    mib(median_of(contender, rss)) + " (largest rank)",
                    "",
                    mib(state),
                    ratio_text,
                    target,
                    met,
                ]
            )
    print(
        table(
            f"Memory (world 1: median of {options.rounds} runs; world 2: per rank)",
            [
                "setting",
                "script",
                "peak RSS MiB",
                "peak CUDA MiB",
                "params + grads + optimizer MiB (per rank)",
                "ratio",
                "target",
                "met",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
