"""ZeRO stages 1-3 (fp32) and stage 2 (bf16) in one torchrun launch.

For each configuration the runtime is rebuilt (a new DeepSpeed engine over the
same process group), a small MLP trains 4 steps of 2 accumulated micro-batches
with Adam (two parameter groups), a StepLR scheduler and ``accel.clip_grad_norm_``, and the same run is done in plain PyTorch on the
whole global batch (the single-process original, computed on every rank). Stages 1
and 3 also save their state after step 2, and a second engine resumes from it. Rank 0
prints one JSON line per configuration; tests/runtime/test_deepspeed.py checks it.
"""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import nullcontext
from dataclasses import replace

import torch
from torch import nn

import accel_migrate.runtime as accel
from accel_migrate.runtime import _state
from accel_migrate.runtime.config import load_config
from accel_migrate.runtime.env import DistEnv

STEPS = 4
#: Micro-batches per optimizer step: the script's loop accumulates gradients.
ACCUMULATE = 2
SAVE_AT = 2


def build() -> tuple[nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.StepLR]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    # Two groups, as nanoGPT's configure_optimizers makes them (weight decay on
    # the matrices only): DeepSpeed steps group by group (see _deepspeed_state).
    optimizer = torch.optim.Adam(
        [
            {"params": [p for p in model.parameters() if p.dim() >= 2]},
            {"params": [p for p in model.parameters() if p.dim() < 2], "lr": 0.01},
        ],
        lr=0.01,
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    return model, optimizer, scheduler


def data() -> torch.utils.data.DataLoader:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(STEPS * 8, 6, generator=generator)
    y = torch.randint(0, 3, (STEPS * 8,), generator=generator)
    return torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, y), batch_size=8 // ACCUMULATE
    )


def plain(precision: str) -> dict[str, object]:
    model, optimizer, scheduler = build()
    autocast = (
        torch.autocast("cpu", dtype=torch.bfloat16)
        if precision == "bf16"
        else nullcontext()
    )
    losses, norms, running = [], [], 0.0
    for i, (x, y) in enumerate(data()):
        with autocast:
            out = model(x)
        loss = nn.functional.cross_entropy(out, y) / ACCUMULATE
        loss.backward()
        running += loss.item()
        if (i + 1) % ACCUMULATE == 0:
            norms.append(nn.utils.clip_grad_norm_(model.parameters(), 0.5).item())
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(running)
            running = 0.0
    state = {k: v.tolist() for k, v in model.state_dict().items()}
    exp_avg = [
        optimizer.state[p]["exp_avg"].tolist()
        for group in optimizer.param_groups
        for p in group["params"]
    ]
    return {"losses": losses, "norms": norms, "state": state, "exp_avg": exp_avg}


def runtime_run(
    stage: int, precision: str, folder: str | None, resume: bool
) -> dict[str, object]:
    # "fp32+offload": the same with fsdp-cpu-offload (ZeRO-Offload).
    precision, _, extra = precision.partition("+")
    config = replace(
        load_config(),
        strategy="deepspeed",
        zero_stage=stage,
        precision=precision,
        fsdp_cpu_offload=extra == "offload",
    )
    _state.reset_runtime(_state.Runtime(config, DistEnv.from_environ()))
    model, optimizer, scheduler = build()
    model = accel.prepare_model(model)
    optimizer = accel.prepare_optimizer(optimizer)
    loader = accel.prepare_dataloader(data())
    start = 0
    if resume:
        start = accel.load_state(folder, scheduler).step
    losses, norms, running = [], [], 0.0
    for i, (x, y) in enumerate(loader, start=start):
        loss = nn.functional.cross_entropy(model(x), y) / ACCUMULATE
        accel.backward(loss)
        running += accel.global_loss(loss).item()
        if (i + 1) % ACCUMULATE == 0:
            norms.append(accel.clip_grad_norm_(model.parameters(), 0.5).item())
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(running)
            running = 0.0
            if folder is not None and not resume and i + 1 == SAVE_AT * ACCUMULATE:
                accel.save_state(folder, scheduler)
    engine = _state.get_runtime().strategy.engine
    state = {k: v.tolist() for k, v in accel.state_dict(model).items()}
    full = optimizer.state_dict()
    exp_avg = [full["state"][i]["exp_avg"].tolist() for i in sorted(full["state"])]
    return {
        "losses": losses,
        "norms": norms,
        "state": state,
        "exp_avg": exp_avg,
        "lr": optimizer.param_groups[0]["lr"],
        "engine": type(engine).__name__,
        "zero_stage": int(engine.zero_optimization_stage()),
        "zero_optimizer": type(engine.optimizer).__name__,
        # What fsdp-cpu-offload and a deepspeed-config file reached the engine as.
        "offload_optimizer": str(
            getattr(engine.zero_offload_optimizer(), "device", None)
        ),
        "offload_param": str(getattr(engine.zero_offload_param(), "device", None)),
        "reduce_bucket_size": int(engine.zero_reduce_bucket_size()),
    }


def main() -> None:
    folder = tempfile.mkdtemp() if accel.rank() == 0 else None
    configurations = [
        *((1, "fp32"), (2, "fp32"), (3, "fp32"), (2, "bf16")),
        (3, "fp32+offload"),
    ]
    if len(sys.argv) > 1:
        configurations = [(int(s), p) for s, p in (a.split(":") for a in sys.argv[1:])]
    for stage, precision in configurations:
        reference = plain(precision.partition("+")[0])
        saving = stage in (1, 3) and precision == "fp32"
        shared = accel.gather(folder)[0] if saving else None  # rank 0's temp dir
        got = runtime_run(
            stage, precision, f"{shared}/s{stage}" if saving else None, False
        )
        result = {
            "stage": stage,
            "precision": precision,
            "plain": reference,
            "runtime": got,
        }
        if saving:
            result["resumed"] = runtime_run(
                stage, precision, f"{shared}/s{stage}", True
            )
        accel.print(json.dumps(result))
    # Under the last runtime: a second trained model is refused in one line
    # (before any engine is built, so nothing waits in a collective).
    second = accel.prepare_model(nn.Linear(2, 2))
    optimizer = torch.optim.SGD(second.parameters(), lr=0.1)  # alive at forward
    try:
        second(torch.zeros(1, 2))
        refused = None
    except RuntimeError as exc:
        refused = str(exc)
    del optimizer
    accel.print(json.dumps({"second_model": refused}))


main()
