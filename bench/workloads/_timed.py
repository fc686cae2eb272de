"""Run a training script unchanged and record, from outside, what it cost.

    BENCH_TARGET=script.py BENCH_REPORT=out.json python _timed.py [script args]

(or this file as the script of ``torchrun`` / ``accel-migrate launch``). The
target runs as ``__main__`` with its own arguments; nothing in it is edited.

Recorded per process, written to ``BENCH_REPORT`` with ``.rank<N>`` before the
suffix:

- ``step_ends``: ``time.perf_counter()`` after every optimizer step (a global
  ``register_optimizer_step_post_hook``), so consecutive differences are whole
  loop iterations: data loading, forward, backward, gradient exchange, step and
  whatever the loop logs. An optimizer stepped more than once between two
  forwards (ZeRO-3's sub-groups step one partition in pieces) records one step
  end, its last call's; ``step_cpu``: ``time.process_time()`` at the same
  moments (CPU time of all the process's threads, which other processes on a
  busy machine do not inflate);
- ``max_rss``: the process's peak resident set (``getrusage``), in bytes;
- ``cuda_peak``: ``torch.cuda.max_memory_allocated()`` where CUDA was used;
- ``state``: the bytes of parameters, gradients and optimizer state this rank
  holds after training (local shards of sharded tensors).

Only torch and the standard library are imported here, so the same file runs in
the Accelerate benchmark environment too.
"""

from __future__ import annotations

import json
import os
import resource
import runpy
import sys
import time
from typing import Any

import torch
from torch.nn.modules.module import register_module_forward_pre_hook
from torch.optim.optimizer import register_optimizer_step_post_hook

_STEPS: dict[int, list[float]] = {}
_CPU: dict[int, list[float]] = {}
_OPTIMIZERS: dict[int, torch.optim.Optimizer] = {}
#: The optimizers whose step has been recorded since the last module forward.
_STEPPED: set[int] = set()


def _before_forward(module: torch.nn.Module, args: Any) -> None:
    _STEPPED.clear()


def _after_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    now, cpu = time.perf_counter(), time.process_time()
    key = id(optimizer)
    _OPTIMIZERS.setdefault(key, optimizer)
    steps, cpus = _STEPS.setdefault(key, []), _CPU.setdefault(key, [])
    if key in _STEPPED:  # the same iteration's step, in one more piece
        steps[-1], cpus[-1] = now, cpu
        return
    _STEPPED.add(key)
    steps.append(now)
    cpus.append(cpu)


def _is_wrapper(optimizer: Any) -> bool:
    """Accelerate's optimizer wraps a torch optimizer whose step is hooked too."""
    return isinstance(getattr(optimizer, "optimizer", None), torch.optim.Optimizer)


def _local_bytes(tensor: Any) -> int:
    if not isinstance(tensor, torch.Tensor):
        return 0
    if hasattr(tensor, "to_local"):  # a DTensor: only this rank's shard is held
        tensor = tensor.to_local()
    return tensor.numel() * tensor.element_size()


def _state_bytes(optimizer: torch.optim.Optimizer | None) -> dict[str, int]:
    if optimizer is None:
        return {}
    params = [p for group in optimizer.param_groups for p in group["params"]]
    state = [v for s in optimizer.state.values() for v in s.values()]
    return {
        "parameters": sum(_local_bytes(p) for p in params),
        "gradients": sum(_local_bytes(p.grad) for p in params),
        "optimizer": sum(_local_bytes(v) for v in state if v.dim() > 0),
        "parameter_count": sum(p.numel() for p in params),
    }


def _report(path: str, started: float) -> None:
    real = [k for k, opt in _OPTIMIZERS.items() if not _is_wrapper(opt)]
    key = real[0] if real else next(iter(_STEPS), None)
    rank = int(os.environ.get("RANK", "0"))
    base, suffix = os.path.splitext(path)
    report = {
        "rank": rank,
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "threads": torch.get_num_threads(),
        "wall": time.perf_counter() - started,
        "step_ends": _STEPS.get(key, []) if key is not None else [],
        "step_cpu": _CPU.get(key, []) if key is not None else [],
        "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "cuda_peak": (
            torch.cuda.max_memory_allocated()
            if torch.cuda.is_available() and torch.cuda.is_initialized()
            else None
        ),
        "state": _state_bytes(_OPTIMIZERS.get(key) if key is not None else None),
    }
    with open(f"{base}.rank{rank}{suffix}", "w") as handle:
        json.dump(report, handle)


def main() -> None:
    target = os.environ["BENCH_TARGET"]
    report = os.environ["BENCH_REPORT"]
    register_optimizer_step_post_hook(_after_step)
    register_module_forward_pre_hook(_before_forward)
    sys.argv = [target, *sys.argv[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    started = time.perf_counter()
    runpy.run_path(target, run_name="__main__")
    _report(report, started)


if __name__ == "__main__":
    main()
