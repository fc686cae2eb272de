"""Run a training script under observation: record every loss given to backward,
stop after N optimizer steps, and record a checksum of the trained parameters.

    python -m accel_migrate.verify.runner --record OUT.json --steps N --mode original -- script.py ARGS...

``--mode original`` records ``Tensor.backward`` calls; ``--mode migrated`` records
``accel.backward`` calls as the global-batch loss (the value the original would
have seen), on every rank, and rank 0 writes the file. The script is not changed.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

import torch


class StopVerification(BaseException):
    """Raised after the last recorded step; not an error."""


class Recorder:
    def __init__(self, steps: int, mode: str) -> None:
        self.steps = steps
        self.mode = mode
        self.losses: list[float] = []
        self.loss_steps: list[int] = []
        self.completed = 0
        self.optimizers: list[torch.optim.Optimizer] = []
        self.facts = {"batchnorm_training": False, "dropout_training": False}

    # -- hooks -------------------------------------------------------------------------
    def on_loss(self, value: float) -> None:
        self.losses.append(value)
        self.loss_steps.append(self.completed)

    def on_step(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        if not any(o is optimizer for o in self.optimizers):
            self.optimizers.append(optimizer)
        self.completed += 1
        if self.completed >= self.steps:
            raise StopVerification

    def on_forward(self, module: torch.nn.Module, _inputs: Any) -> None:
        if not module.training:
            return
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            self.facts["batchnorm_training"] = True
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0:
            self.facts["dropout_training"] = True

    # -- results -----------------------------------------------------------------------
    def parameters(self) -> list[dict[str, Any]]:
        """Per parameter, in optimizer order: numel, sum and sum of squares (fp64)."""
        # Run as a script: the runtime is there only if the migrated copy loaded it.
        state = sys.modules.get("accel_migrate.runtime._state")
        runtime = state.peek_runtime() if state is not None else None
        checksums = []
        for optimizer in self.optimizers:
            # Under DeepSpeed param_groups hold the engine's flat partitions.
            engine_view = (
                runtime.strategy.full_parameters(optimizer) if runtime else None
            )
            groups = (
                [{"params": engine_view}]
                if engine_view is not None
                else optimizer.param_groups
            )
            for group in groups:
                for param in group["params"]:
                    full = param.detach()
                    if hasattr(
                        full, "full_tensor"
                    ):  # an FSDP shard: gather (collective)
                        full = full.full_tensor()
                    values = full.double()
                    checksums.append(
                        {
                            "numel": int(values.numel()),
                            "sum": float(values.sum()),
                            "sumsq": float((values * values).sum()),
                        }
                    )
        return checksums

    def result(self, stopped: bool) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "steps": self.completed,
            "stopped": stopped,
            "losses": self.losses,
            "loss_steps": self.loss_steps,
            "parameters": self.parameters(),
            "facts": self.facts,
        }


def _install(recorder: Recorder) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(recorder.on_step)
    torch.nn.modules.module.register_module_forward_pre_hook(recorder.on_forward)
    if recorder.mode == "original":
        original_backward = torch.Tensor.backward

        def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.numel() == 1:
                recorder.on_loss(float(self.detach()))
            return original_backward(self, *args, **kwargs)

        torch.Tensor.backward = backward  # type: ignore[method-assign]
    else:
        import accel_migrate.runtime as accel

        original = accel.backward

        def accel_backward(loss: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            recorder.on_loss(float(accel.global_loss(loss).detach()))
            return original(loss, *args, **kwargs)

        accel.backward = accel_backward  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="accel_migrate.verify.runner")
    parser.add_argument("--record", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--mode", choices=["original", "migrated"], required=True)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    script_args = options.args[1:] if options.args[:1] == ["--"] else options.args

    recorder = Recorder(options.steps, options.mode)
    _install(recorder)
    script = Path(options.script).resolve()
    sys.argv = [str(script), *script_args]
    sys.path.insert(0, str(script.parent))
    stopped = False
    try:
        runpy.run_path(str(script), run_name="__main__")
    except StopVerification:
        stopped = True
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            raise
    result = recorder.result(stopped)
    if int(os.environ.get("RANK", "0")) == 0:
        Path(options.record).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
