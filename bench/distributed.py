"""Distributed step time: the runtime's DDP and FSDP against hand-written loops and
HF Accelerate, in the same invocation.

    python bench/distributed.py [--rounds 3] [--steps 30]

CPU: world 2 over gloo, one thread per rank. CUDA (where ``torch.cuda`` has
devices): world 1..N over NCCL, on a larger MLP so that a step is not all launch
latency. Contenders, all on the same model, data and global batch:

- runtime DDP / FSDP: ``workloads/train_mlp.py`` migrated by the current codemod,
  under ``accel-migrate launch --strategy ddp|fsdp``;
- hand-written: ``workloads/ddp_mlp.py`` (DistributedDataParallel) and
  ``workloads/fsdp_mlp.py`` with ``fully_shard`` on each layer and then the root
  (the runtime's per-block FSDP: the MLP's layers are an ``nn.ModuleList`` of one
  class), and on the root only (the runtime's ``--fsdp-wrap root``, for
  reference), under torchrun;
- Accelerate: ``workloads/accelerate_mlp.py`` (``split_batches=True``: the same
  global batch) in ``bench/.venv-accelerate``; skipped with a note when that
  environment is missing or Accelerate cannot run the strategy here.

Ratios pair each round's runs (they ran seconds apart) and take the median over
the rounds. On the CPU a tiny MLP (a step of about a millisecond) also measures
the runtime's fixed cost per DDP step against the hand-written loop, in
microseconds of CPU time.

``--deepspeed-python PY`` (an environment with DeepSpeed, never the main one)
adds, for each stage of ``--zero-stages`` (default 1,2), the runtime's
``launch --strategy deepspeed --zero-stage N`` against ``workloads/deepspeed_mlp.py``,
a plain ``deepspeed.initialize`` loop with DeepSpeed's default config
(``--zero-stages 1,2,3`` adds stage 3: the runtime steps its partition in
sub-groups, ``sub_group_size``, and ``workloads/_timed.py`` counts the pieces of
one iteration's step as one step).

Targets: the runtime's DDP within 2% of hand-written DDP, its per-block FSDP
within 2% of the hand-written per-block ``fully_shard``, its ZeRO within 2% of
the plain DeepSpeed loop; the runtime no slower than Accelerate (DDP and FSDP).
``--fsdp-only``: the FSDP contenders alone; ``--deepspeed-only``: the ZeRO ones.
"""

from __future__ import annotations

import argparse
import os

from _common import (
    THREADS,
    WORKLOADS,
    Contender,
    accelerate_python,
    cuda_devices,
    launch,
    load,
    median_step,
    migrate_workload,
    ms,
    paired_ratio,
    run_rounds,
    spread,
    table,
    torchrun,
    verdict,
    workdir,
)

WARMUP = 10
DDP_TARGET = 1.02  # runtime DDP / hand-written DDP
FSDP_TARGET = 1.02  # runtime per-block FSDP / hand-written per-block fully_shard
ZERO_TARGET = 1.02  # runtime ZeRO-N / plain deepspeed.initialize ZeRO-N
ACCELERATE_TARGET = 1.0  # runtime / Accelerate
TINY = ["--features", "16", "--hidden", "16", "--layers", "1", "--batch-size", "16"]
CUDA_MODEL = ["--hidden", "4096", "--layers", "4", "--batch-size", "1024"]


def contenders(
    world: int, migrated: object, args: list[str], accelerate: str | None, why: str
) -> dict[str, Contender]:
    def accelerate_contender(name: str, extra: list[str]) -> Contender:
        if accelerate is None:
            return Contender(name, None, note=why)
        return Contender(
            name,
            torchrun(world, accelerate),
            WORKLOADS / "accelerate_mlp.py",
            [*args, *extra],
        )

    return {
        "runtime ddp": Contender(
            "runtime DDP (`launch --strategy ddp`)",
            launch(world, "ddp"),
            migrated,  # type: ignore[arg-type]
            args,
        ),
        "hand ddp": Contender(
            "hand-written DistributedDataParallel",
            torchrun(world),
            WORKLOADS / "ddp_mlp.py",
            args,
        ),
        "accelerate ddp": accelerate_contender("Accelerate (DDP)", []),
        "runtime fsdp": Contender(
            "runtime FSDP (`launch --strategy fsdp`)",
            launch(world, "fsdp"),
            migrated,  # type: ignore[arg-type]
            args,
        ),
        "hand fsdp": Contender(
            "hand-written fully_shard (each layer + root, as the runtime)",
            torchrun(world),
            WORKLOADS / "fsdp_mlp.py",
            [*args, "--wrap", "layers"],
        ),
        "hand fsdp root": Contender(
            "hand-written fully_shard (root only)",
            torchrun(world),
            WORKLOADS / "fsdp_mlp.py",
            [*args, "--wrap", "root"],
        ),
        "accelerate fsdp": accelerate_contender("Accelerate (FSDP2)", ["--fsdp"]),
    }


def zero_contenders(
    world: int,
    migrated: object,
    args: list[str],
    python: str,
    stages: list[int],
    config: str | None = None,
) -> dict[str, Contender]:
    """The runtime's ZeRO and the plain DeepSpeed loop, per stage, in ``python``;
    ``config``: a ``--deepspeed-config`` file for the runtime's launches."""
    group: dict[str, Contender] = {}
    extra = ["--deepspeed-config", config] if config else []
    for stage in stages:
        group[f"runtime zero{stage}"] = Contender(
            f"runtime ZeRO-{stage} (`launch --strategy deepspeed --zero-stage {stage}"
            + (" --deepspeed-config`)" if config else "`)"),
            [
                *launch(world, "deepspeed", python=python),
                *("--zero-stage", str(stage), *extra),
            ],
            migrated,  # type: ignore[arg-type]
            args,
        )
        group[f"hand zero{stage}"] = Contender(
            f"plain deepspeed.initialize, ZeRO-{stage} (default config)",
            torchrun(world, python),
            WORKLOADS / "deepspeed_mlp.py",
            [*args, "--zero-stage", str(stage)],
        )
    return group


def rows_for(setting: str, group: dict[str, Contender]) -> list[list[str]]:
    comparisons = {
        **{
            f"runtime zero{n}": [(f"hand zero{n}", ZERO_TARGET, "plain DeepSpeed")]
            for n in (1, 2, 3)
        },
        # key: (what it is compared with, target, label)
        "runtime ddp": [
            ("hand ddp", DDP_TARGET, "hand-written"),
            ("accelerate ddp", ACCELERATE_TARGET, "Accelerate"),
        ],
        "runtime fsdp": [
            ("hand fsdp", FSDP_TARGET, "hand-written (per layer)"),
            ("accelerate fsdp", ACCELERATE_TARGET, "Accelerate"),
        ],
    }
    rows = []
    for key, contender in group.items():
        if contender.skipped:
            rows.append([setting, contender.name, contender.note, "", "", "", "", ""])
            continue
        value = median_step(contender, WARMUP)
        cpu = median_step(contender, WARMUP, "step_cpu")
        low, high = spread(contender, WARMUP)
        ratios, targets, met = [], [], []
        for other, target, label in comparisons.get(key, []):
            if other not in group or group[other].skipped:
                ratios.append(f"{label}: n/a")
                continue
            ratio = paired_ratio(contender, group[other], WARMUP)
            ratios.append(f"{label}: {ratio:.3f}")
            if target is not None:
                targets.append(f"{label} <= {target:g}")
                met.append(verdict(ratio <= target))
        rows.append(
            [
                setting,
                contender.name,
                ms(value),
                f"{ms(low)}-{ms(high)}",
                ms(cpu),
                "; ".join(ratios),
                "; ".join(targets),
                "; ".join(met),
            ]
        )
    return rows


def fixed_cost_rows(
    group: dict[str, Contender], tiny: dict[str, Contender]
) -> list[list[str]]:
    rows = []
    for key, contender in tiny.items():
        setting = "CPU, world 2, tiny MLP"
        if contender.skipped:
            rows.append([setting, contender.name, contender.note, *[""] * 5])
            continue
        cpu = median_step(contender, WARMUP, "step_cpu")
        note = ""
        hand, big = tiny["hand ddp"], group["runtime ddp"]
        if key == "runtime ddp" and not hand.skipped and not big.skipped:
            added = cpu - median_step(hand, WARMUP, "step_cpu")
            share = added / median_step(big, WARMUP, "step_cpu")
            note = (
                f"runtime adds {added * 1e6:+.0f} us CPU/step "
                f"= {share:+.2%} of the 2.6 M step's CPU"
            )
        low, high = spread(contender, WARMUP)
        rows.append(
            [
                setting,
                contender.name,
                f"{median_step(contender, WARMUP) * 1e3:.2f}",
                f"{low * 1e3:.2f}-{high * 1e3:.2f}",
                f"{cpu * 1e3:.2f}",
                note,
                "",
                "",
            ]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30, help="steps per epoch")
    parser.add_argument("--no-cpu", action="store_true", help="CUDA worlds only")
    parser.add_argument(
        "--fsdp-only",
        action="store_true",
        help="only the FSDP contenders (runtime, hand-written, Accelerate)",
    )
    parser.add_argument(
        "--deepspeed-python",
        help="the Python of an environment with DeepSpeed: adds the ZeRO contenders",
    )
    parser.add_argument("--zero-stages", default="1,2", help="ZeRO stages to time")
    parser.add_argument(
        "--deepspeed-only", action="store_true", help="only the ZeRO contenders"
    )
    parser.add_argument(
        "--runtime-deepspeed-config",
        help="a --deepspeed-config JSON file for the runtime's ZeRO launches",
    )
    options = parser.parse_args(argv)
    stages = [int(n) for n in options.zero_stages.split(",") if n]
    if options.deepspeed_python and os.sep in options.deepspeed_python:
        # the contenders run in a scratch folder: a relative path would not resolve
        options.deepspeed_python = os.path.abspath(options.deepspeed_python)
    started_load = load()
    accelerate, why = accelerate_python()
    rows: list[list[str]] = []
    with workdir() as folder:
        migrated = migrate_workload(folder)
        if not options.no_cpu:
            args = ["--steps-per-epoch", str(options.steps), "--epochs", "2"]
            # Keep the CPU runs on the CPU even on a GPU machine.
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            tiny_args = [*TINY, "--steps-per-epoch", "300", "--epochs", "2"]
            tiny = {
                "runtime ddp": Contender(
                    "runtime DDP", launch(2, "ddp"), migrated, tiny_args
                ),
                "hand ddp": Contender(
                    "hand-written DDP", torchrun(2), WORKLOADS / "ddp_mlp.py", tiny_args
                ),
            }
            try:
                group = contenders(2, migrated, args, accelerate, why)
                if options.fsdp_only:
                    group = {k: c for k, c in group.items() if "fsdp" in k}
                    tiny = {}
                if options.deepspeed_only:
                    group, tiny = {}, {}
                if options.deepspeed_python:
                    group.update(
                        zero_contenders(
                            2,
                            migrated,
                            args,
                            options.deepspeed_python,
                            stages,
                            (
                                os.path.abspath(options.runtime_deepspeed_config)
                                if options.runtime_deepspeed_config
                                else None
                            ),
                        )
                    )
                run_rounds([*group.values(), *tiny.values()], options.rounds, folder)
            finally:
                if visible is None:
                    del os.environ["CUDA_VISIBLE_DEVICES"]
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = visible
            rows += rows_for("CPU, world 2, gloo", group)
            if tiny:
                rows += fixed_cost_rows(group, tiny)
        devices = cuda_devices()
        if devices == 0:
            rows.append(["CUDA, NCCL", "all", "skipped: no CUDA", "", "", "", "", ""])
        for world in range(1, devices + 1):
            args = [*CUDA_MODEL, "--steps-per-epoch", "100", "--epochs", "2"]
            group = contenders(world, migrated, args, accelerate, why)
            if options.fsdp_only:
                group = {k: c for k, c in group.items() if "fsdp" in k}
            run_rounds(list(group.values()), options.rounds, folder)
            rows += rows_for(f"CUDA, world {world}, NCCL", group)
    print(
        table(
            f"Distributed step time (median of {options.rounds} runs; CPU: "
            f"{THREADS} thread per rank, {2 * options.steps - 1 - WARMUP} timed steps "
            f"a run; load {started_load}-{load()})",
            [
                "setting",
                "contender",
                "step ms",
                "run medians ms",
                "CPU ms/step (rank 0)",
                "ratio (runtime / other, wall)",
                "target",
                "met",
            ],
            rows,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
