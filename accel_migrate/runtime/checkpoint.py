"""``accel.save_state(dir)`` / ``accel.load_state(dir)``: resume a job where it stopped.

A state folder holds everything a run needs to continue as if it had never
stopped: every prepared model and optimizer, the precision's loss scale, the
script's own objects passed in (LR schedulers...) and small values
(``epoch=...``), and per rank: the RNG states (torch CPU, CUDA for a run on the
GPU only, ``random``, NumPy) and where each prepared loader stands (epoch, step, and the epoch's
batches, so a resumed epoch sees the same samples).

Models and optimizers: under FSDP each rank writes its own shards
(``torch.distributed.checkpoint``, see ``sharded_checkpoint``), nothing gathered;
otherwise their full state dicts, replicated, written once by rank 0. Both load
at any world size. So does the rest in batch mode 'global', where every world
size draws the same global batches: the data positions are global (rank 0's are
taken), and rank 0's RNG states, which draw the data order, are restored. Other
ranks' RNG streams cannot be mapped to another split of the batches (a warning
says so). Per-device batches are each rank's own: such a state resumes only at
its world size. ``python -m accel_migrate.runtime.checkpoint convert DIR OUT.pt``
writes a folder's state as plain state dicts.

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
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ._state import Runtime

MANIFEST = "manifest.json"
FORMAT = 2  # 2: tensors 'sharded' (DCP) or 'gathered'; batch_mode


@dataclass(frozen=True)
class Resume:
    """What ``load_state`` restored. ``epoch``/``step``: the first prepared loader's
    position (the epoch to run next, and the step it resumes at)."""

    epoch: int
    step: int
    values: dict[str, Any] = field(default_factory=dict)


def _uses_cuda(runtime: Runtime) -> bool:
    """Does this run use CUDA (its device is a GPU)? A run kept on the CPU
    (``accel.device(accelerator=False)``, or no GPU) does not, also on a
    machine that has GPUs: its CUDA RNG draws nothing it trains on."""
    return runtime.device.type == "cuda"


def _rng_state(cuda: bool) -> dict[str, Any]:
    """The RNG states to save: CUDA's only for a run on the GPU (``cuda``), so
    that a CPU run's state is the same on any machine and saving it creates no
    CUDA context on every GPU."""
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
    }
    if cuda:
        state["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        state["numpy"] = numpy.random.get_state()
    return state


def _set_rng_state(state: dict[str, Any], cuda: bool) -> None:
    """Restore ``state``; its CUDA states only in a run on the GPU (``cuda``):
    a CPU run resumed from a GPU run's state leaves CUDA untouched, and a GPU
    run resumed from a CPU run's state (none saved) keeps its own."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and cuda:
        # One state per device the saving node had; a job resumed on a node with
        # fewer devices restores those it has.
        for device, device_state in enumerate(
            state["cuda"][: torch.cuda.device_count()]
        ):
            torch.cuda.set_rng_state(device_state, device)
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
    sharded = runtime.strategy.sharded_checkpoint
    if sharded:
        # A model saved before its first forward is sharded first: unsharded,
        # each rank's copy would pass for a replica, and ranks may differ.
        for module in runtime.modules():
            module.ensure_ready()
    models = [_original(m) for m in runtime.models()]
    shared: dict[str, Any] = {
        "objects": [o.state_dict() for o in objects],
        "precision": runtime.precision.state_dict(),
        "values": values,
        "model_count": len(models),
    }
    if not sharded:
        # Every rank gathers (collectives where state is split); rank 0 writes.
        shared["models"] = [runtime.strategy.module_state_dict(m) for m in models]
        shared["optimizers"] = [o.state_dict() for o in runtime.optimizers()]
    if env.is_main:
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
    comm.barrier()
    if sharded:
        from .sharded_checkpoint import save_tensors

        shared["optimizer_parts"] = save_tensors(staging, models, runtime.optimizers())
    own = {
        "rng": _rng_state(_uses_cuda(runtime)),
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
            "batch_mode": runtime.config.batch_mode,
            "tensors": "sharded" if sharded else "gathered",
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
    if manifest["format"] > FORMAT:
        raise RuntimeError(
            f"{target} was written by a newer accel-migrate (state format "
            f"{manifest['format']}; this one reads up to {FORMAT})"
        )
    saved_world = int(manifest["world_size"])
    if saved_world != env.world_size and manifest.get("batch_mode") != "global":
        # Per-device batches are dealt out per rank: another world deals others.
        raise RuntimeError(
            f"{target} was saved by {saved_world} processes, this job has "
            f"{env.world_size}: per-rank data positions and RNG states cannot be "
            f"matched (batch mode {manifest.get('batch_mode', 'unknown')!r}; only a "
            f"state saved in batch mode 'global' resumes at another world size)"
        )
    # Build the strategies' wrappers first (FSDP shards and remaps optimizers), so
    # that the state below lands in the form the training will use.
    for module in runtime.modules():
        module.ensure_ready()
    shared = torch.load(target / "shared.pt", map_location="cpu", weights_only=False)
    models = [_original(m) for m in runtime.models()]
    optimizers = runtime.optimizers()
    sharded = manifest.get("tensors") == "sharded"
    saved_models = shared["model_count"] if sharded else len(shared["models"])
    saved_optimizers = len(shared["optimizer_parts" if sharded else "optimizers"])
    if saved_models != len(models) or saved_optimizers != len(optimizers):
        raise RuntimeError(
            f"{target} holds {saved_models} models and {saved_optimizers} "
            f"optimizers; this script prepared {len(models)} and {len(optimizers)}"
        )
    if len(objects) != len(shared["objects"]):
        raise RuntimeError(
            f"{target} holds {len(shared['objects'])} extra objects (schedulers...); "
            f"load_state was given {len(objects)}"
        )
    if sharded:
        from .sharded_checkpoint import load_tensors

        load_tensors(target, models, optimizers, shared["optimizer_parts"])
    else:
        for model, state in zip(models, shared["models"], strict=True):
            runtime.strategy.load_module_state_dict(model, state)
        for optimizer, state in zip(optimizers, shared["optimizers"], strict=True):
            optimizer.load_state_dict(state)
    for obj, state in zip(objects, shared["objects"], strict=True):
        obj.load_state_dict(state)
    if shared["precision"]:
        runtime.precision.load_state_dict(shared["precision"])
    own = _own_part(target, env.rank, saved_world, env.world_size, env.is_main)
    loaders = runtime.loaders()
    unmatched = [p for p in own["loaders"][len(loaders) :] if int(p["step"])]
    if unmatched:
        # Its Resume.step would say mid-epoch while the loader starts the epoch over.
        raise RuntimeError(
            f"{target} was saved in the middle of an epoch of {len(own['loaders'])} "
            f"prepared loaders, and this job prepared {len(loaders)} before "
            f"load_state: prepare every loader first, and run the script under "
            f"`accel-migrate launch` (a plain `python` run leaves loaders unprepared)"
        )
    for loader, position in zip(loaders, own["loaders"], strict=False):
        loader.accel_resume(position)
    if own["rng"] is not None:
        _set_rng_state(own["rng"], _uses_cuda(runtime))
    first = own["loaders"][0] if own["loaders"] else {"epoch": 0, "step": 0}
    return Resume(
        epoch=int(first["epoch"]), step=int(first["step"]), values=shared["values"]
    )


def _own_part(
    target: Path, rank: int, saved_world: int, world: int, is_main: bool
) -> dict[str, Any]:
    """This rank's data positions and RNG states.

    At the saved world size, each rank's own. At another (batch mode 'global'),
    every rank takes rank 0's data positions, which are global (the epoch's global
    batches and the step in it), and rank 0 its RNG states: rank 0's torch RNG is
    the one that draws the data order, and the one the original script had. The
    RNG streams of the other ranks (dropout, random augmentation on their slices)
    cannot be mapped to another split of the batches: a rank that was saved keeps
    its own streams, a new rank the streams it has now.
    """

    def read(r: int) -> dict[str, Any]:
        return torch.load(
            target / f"rank{r}.pt", map_location="cpu", weights_only=False
        )

    if saved_world == world:
        return read(rank)
    own = read(rank) if rank < saved_world else {"rng": None}
    if is_main:
        warnings.warn(
            f"resuming at {_processes(world)} a state saved by "
            f"{_processes(saved_world)}: the "
            f"data order and rank 0's RNG states continue as saved; the RNG streams "
            f"of the other ranks (dropout, random augmentation) cannot follow the "
            f"new split of each batch, so a model that draws random numbers in its "
            f"forward continues differently from an uninterrupted run",
            stacklevel=4,
        )
    return {"rng": own["rng"], "loaders": read(0)["loaders"]}


def _processes(count: int) -> str:
    return f"{count} process" if count == 1 else f"{count} processes"


def read_plain_state(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """A state folder's models and optimizers as plain state dicts, in one process
    without a process group, whichever world size or format wrote it: ``models``
    (original keys) and ``optimizers`` (PyTorch's layout, integer parameter ids),
    with ``objects``, ``precision`` and ``values`` as saved."""
    target = Path(directory)
    if not (target / MANIFEST).exists():
        raise FileNotFoundError(f"{target} holds no complete state ({MANIFEST})")
    manifest = json.loads((target / MANIFEST).read_text())
    shared = torch.load(target / "shared.pt", map_location="cpu", weights_only=False)
    if manifest.get("tensors") == "sharded":
        from .sharded_checkpoint import read_plain

        shared.update(
            read_plain(target, shared["model_count"], shared["optimizer_parts"])
        )
    return {
        key: shared[key]
        for key in ("models", "optimizers", "objects", "precision", "values")
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m accel_migrate.runtime.checkpoint",
        description="Convert an accel.save_state folder to one plain torch.save file.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser(
        "convert",
        help="write the folder's state as plain state dicts (no DTensors, no shards)",
    )
    convert.add_argument("directory", help="the folder accel.save_state wrote")
    convert.add_argument("output", help="the .pt file to write")
    convert.add_argument(
        "--model",
        type=int,
        metavar="K",
        help="write only prepared model K's state dict (0: the first), loadable "
        "with the original script's model.load_state_dict(torch.load(OUTPUT))",
    )
    args = parser.parse_args(argv)
    state = read_plain_state(args.directory)
    if args.model is not None:
        if not 0 <= args.model < len(state["models"]):
            parser.error(
                f"--model {args.model}: the folder holds {len(state['models'])} models"
            )
        torch.save(state["models"][args.model], args.output)
    else:
        torch.save(state, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
