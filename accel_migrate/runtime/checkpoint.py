"""``accel.save_state(dir)`` / ``accel.load_state(dir)``: resume a job where it stopped.

A state folder holds everything a run needs to continue as if it had never
stopped: every prepared model and optimizer (full state dicts, gathered under
FSDP), the precision's loss scale, the script's own objects passed in (LR
schedulers...) and small values (``epoch=...``), and per rank: the RNG states
(torch CPU and CUDA, ``random``, NumPy) and where each prepared loader stands
(epoch, step, and the epoch's batches, so a resumed epoch sees the same samples).

Writing is atomic for the folder as a whole: everything goes into a temporary
folder next to it, which replaces the old one only once every rank has written
its part and a manifest closes it. A crash at any point leaves the previous state
complete; a folder without its manifest is never loaded.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._state import Runtime

MANIFEST = "manifest.json"
FORMAT = 1


@dataclass(frozen=True)
class Resume:
    """What ``load_state`` restored. ``epoch``/``step``: the first prepared loader's
    position (the epoch to run next, and the step it resumes at)."""

    epoch: int
    step: int
    values: dict[str, Any] = field(default_factory=dict)


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    numpy = sys.modules.get("numpy")
    if "numpy" in state and numpy is not None:
        numpy.random.set_state(state["numpy"])


def save_state(
    runtime: Runtime,
    directory: str | os.PathLike[str],
    objects: tuple[Any, ...],
    values: dict[str, Any],
) -> None:
    target = Path(directory)
    staging = target.with_name(f".{target.name}.incomplete")
    env, comm = runtime.env, runtime.comm
    # Every rank gathers (collectives under FSDP); rank 0 writes the shared part.
    shared = {
        "models": [
            runtime.strategy.module_state_dict(_original(m)) for m in runtime.models()
        ],
        "optimizers": [o.state_dict() for o in runtime.optimizers()],
        "objects": [o.state_dict() for o in objects],
        "precision": runtime.precision.state_dict(),
        "values": values,
    }
    if env.is_main:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    comm.barrier()
    own = {
        "rng": _rng_state(),
        "loaders": [loader.accel_position() for loader in runtime.loaders()],
    }
    torch.save(own, staging / f"rank{env.rank}.pt")
    if env.is_main:
        torch.save(shared, staging / "shared.pt")
    comm.barrier()
    if env.is_main:
        manifest = {
            "format": FORMAT,
            "world_size": env.world_size,
            "strategy": runtime.strategy.name,
        }
        (staging / MANIFEST).write_text(json.dumps(manifest))
        _replace(staging, target)
    comm.barrier()


def _replace(staging: Path, target: Path) -> None:
    """Swap the complete staging folder in for the target, never leaving neither."""
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        os.replace(target, old)
    os.replace(staging, target)
    shutil.rmtree(old, ignore_errors=True)


def _original(model: Any) -> Any:
    return getattr(model, "original_module", model)


def load_state(
    runtime: Runtime, directory: str | os.PathLike[str], objects: tuple[Any, ...]
) -> Resume | None:
    target = Path(directory)
    env, comm = runtime.env, runtime.comm
    manifest_text = (
        (target / MANIFEST).read_text()
        if env.is_main and (target / MANIFEST).exists()
        else None
    )
    manifest_text = comm.broadcast_object(manifest_text)
    if manifest_text is None:
        return None  # nothing saved yet (or only an interrupted save): start afresh
    manifest = json.loads(manifest_text)
    if manifest["world_size"] != env.world_size:
        raise RuntimeError(
            f"{target} was saved by {manifest['world_size']} processes, this job has "
            f"{env.world_size}: per-rank data positions and RNG states cannot be matched"
        )
    # Build the strategies' wrappers first (FSDP shards and remaps optimizers), so
    # that the state below lands in the form the training will use.
    for module in runtime.modules():
        module.ensure_ready()
    shared = torch.load(target / "shared.pt", map_location="cpu", weights_only=False)
    models, optimizers = runtime.models(), runtime.optimizers()
    if len(shared["models"]) != len(models) or len(shared["optimizers"]) != len(
        optimizers
    ):
        raise RuntimeError(
            f"{target} holds {len(shared['models'])} models and {len(shared['optimizers'])} "
            f"optimizers; this script prepared {len(models)} and {len(optimizers)}"
        )
    for model, state in zip(models, shared["models"], strict=True):
        runtime.strategy.load_module_state_dict(_original(model), state)
    for optimizer, state in zip(optimizers, shared["optimizers"], strict=True):
        optimizer.load_state_dict(state)
    if len(objects) != len(shared["objects"]):
        raise RuntimeError(
            f"{target} holds {len(shared['objects'])} extra objects (schedulers...); "
            f"load_state was given {len(objects)}"
        )
    for obj, state in zip(objects, shared["objects"], strict=True):
        obj.load_state_dict(state)
    if shared["precision"]:
        runtime.precision.load_state_dict(shared["precision"])
    own = torch.load(
        target / f"rank{env.rank}.pt", map_location="cpu", weights_only=False
    )
    for loader, position in zip(runtime.loaders(), own["loaders"], strict=False):
        loader.accel_resume(position)
    _set_rng_state(own["rng"])
    first = own["loaders"][0] if own["loaders"] else {"epoch": 0, "step": 0}
    return Resume(
        epoch=int(first["epoch"]), step=int(first["step"]), values=shared["values"]
    )
