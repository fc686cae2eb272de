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
(``--fsdp-wrap root``), per-block FSDP and a hand-written per-block
``fully_shard`` (plain torch under torchrun, same workload and tracker); with
``--options`` also ``reshard_after_forward=False`` (runtime and hand-written) and
the hand-written loop without backward prefetch; with an environment that has
DeepSpeed (``--deepspeed-python``, default ``bench/.venv-deepspeed``; never the main
one, where the test suite would start running DeepSpeed's tests), the runtime's
ZeRO stages 1-3. Plus ``torch.cuda.max_memory_allocated`` where CUDA is used.
Target: per-block FSDP and ZeRO-3 at world W peak at most (world 1's peak / W +
one block's parameters) x 1.10.
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
#: (row, launcher: a strategy of `accel-migrate launch` or "torchrun" for the
#: hand-written loop, launcher flags, workload flags)
PEAK_KINDS = (
    ("DDP", "ddp", [], []),
    ("FSDP, root only", "fsdp", ["--fsdp-wrap", "root"], []),
    ("FSDP, per block", "fsdp", [], []),
    ("hand-written fully_shard, per block", "torchrun", [], []),
)
#: The FSDP2 options that might move the per-block peak (``--part peak --options``).
PEAK_OPTIONS = (
    (
        "FSDP, per block, --no-reshard-after-forward",
        "fsdp",
        ["--no-reshard-after-forward"],
        [],
    ),
    ("hand-written, reshard_after_forward=False", "torchrun", [], ["--no-reshard"]),
    ("hand-written, no backward prefetch", "torchrun", [], ["--no-prefetch"]),
)
PER_BLOCK = ("FSDP, per block", "hand-written fully_shard, per block")
#: The runtime's ZeRO stages, in an environment with DeepSpeed (``--deepspeed-python``).
ZERO_STAGES = (1, 2, 3)
DEEPSPEED_VENV = BENCH / ".venv-deepspeed"
SHARDS_ALL = (*PER_BLOCK, "ZeRO-3")  # the rows the 1/W + one block target is for


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
    command: list[str], mode: str, flags: list[str], report: Path, world: int
) -> list[dict[str, Any]] | str:
    """Per-rank reports of one run of the peak workload, or why there are none.
    Ranks beyond the GPUs there are run on the CPU (the tracker counts either)."""
    env = child_environment()
    if world > cuda_devices():
        env["CUDA_VISIBLE_DEVICES"] = ""
    done = subprocess.run(
        [*command, str(PEAK_WORKLOAD), mode, str(report), *flags],
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


def deepspeed_python(given: str | None) -> str | None:
    """The interpreter of an environment with DeepSpeed, or None: the ZeRO rows are
    skipped. DeepSpeed stays out of the main environment, where the test suite
    would start running its DeepSpeed tests."""
    if given:
        return given
    python = DEEPSPEED_VENV / "bin" / "python"
    return str(python) if python.exists() else None


def model_state_peaks(
    folder: Path,
    worlds: list[int],
    options: bool,
    deepspeed: str | None = None,
    only: list[str] | None = None,
) -> str:
    """The peak-model-state table: the original at world 1, then each strategy
    (those whose row name contains one of ``only``, when given)."""
    Job = tuple[list[str], str, list[str]]  # command, workload mode, workload flags
    jobs: dict[tuple[int, str], Job] = {
        (1, "original (no runtime)"): ([PYTHON], "plain", [])
    }
    kinds = PEAK_KINDS + (PEAK_OPTIONS if options else ())
    for world in worlds:
        for name, starter, flags, workload_flags in kinds:
            if starter == "torchrun":
                jobs[world, name] = (torchrun(world), "hand", workload_flags)
            else:
                command = [*launch(world, starter), *flags]
                jobs[world, name] = (command, "runtime", workload_flags)
        for stage in ZERO_STAGES if deepspeed else ():
            command = [
                *launch(world, "deepspeed", python=deepspeed),  # type: ignore[arg-type]
                "--zero-stage",
                str(stage),
            ]
            jobs[world, f"ZeRO-{stage}"] = (command, "runtime", [])
    if only:
        jobs = {
            key: job
            for key, job in jobs.items()
            if key[0] == 1 or any(part in key[1] for part in only)
        }
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {
            key: pool.submit(
                _peak_run, *job, folder / f"peak{i}.json", key[0]  # type: ignore[misc]
            )
            for i, (key, job) in enumerate(jobs.items())
        }
        results = {key: future.result() for key, future in futures.items()}
    base = results[1, "original (no runtime)"]
    rows = []
    for (world, name), reports in results.items():
        if isinstance(reports, str):
            rows.append([world, name, reports, *[""] * 8])
            continue
        peak = max(r["peak"] for r in reports)
        cuda = [r["cuda_peak"] for r in reports if r["cuda_peak"] is not None]
        target, ratio, met = "", "", ""
        if not isinstance(base, str):
            one = max(r["peak"] for r in base)
            ratio = f"{peak / one:.3f}"
            if name in SHARDS_ALL:
                bound = (one / world + reports[0]["block"]) * PEAK_TARGET
                target = f"<= {mib(bound)} (1/{world} + 1 block, +10%)"
                met = verdict(peak <= bound)
        rows.append(
            [
                world,
                name,
                max(r["units"] for r in reports) or "",
                mib(peak),
                mib(max(r["setup_peak"] for r in reports)),
                mib(max(r["training_peak"] for r in reports)),
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
            "of it: setup",
            "training",
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
    parser.add_argument(
        "--options",
        action="store_true",
        help="peak table: also reshard_after_forward=False and no backward prefetch",
    )
    parser.add_argument(
        "--deepspeed-python",
        help="peak table: the Python of an environment with DeepSpeed, for the ZeRO "
        f"rows (default: {DEEPSPEED_VENV.relative_to(BENCH.parent)}/bin/python if "
        "it exists; else no ZeRO rows)",
    )
    parser.add_argument(
        "--rows",
        help="peak table: only the rows whose name contains one of these "
        "(comma-separated), besides world 1",
    )
    options = parser.parse_args(argv)
    if options.part in ("all", "peak"):
        with workdir() as folder:
            worlds = [int(w) for w in options.worlds.split(",")]
            deepspeed = deepspeed_python(options.deepspeed_python)
            print(
                model_state_peaks(
                    folder,
                    worlds,
                    options.options,
                    deepspeed,
                    options.rows.split(",") if options.rows else None,
                )
            )
            if deepspeed is None:
                print(f"(no ZeRO rows: no {DEEPSPEED_VENV}; see --deepspeed-python)")
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
