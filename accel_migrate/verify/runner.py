"""Run a training script under observation: record every loss given to backward,
stop after N optimizer steps, and record a checksum of the trained parameters.

    python -m accel_migrate.verify.runner --record OUT.json --steps N --mode original -- script.py ARGS...

``--mode original`` records ``Tensor.backward`` calls; ``--mode migrated`` records
``accel.backward`` calls as the global-batch loss (the value the original would
have seen), on every rank, and rank 0 writes the file. The script is not changed.
``--deterministic`` disables dropout and keys the step's random draws in the same
way in both modes (``stochastic.py``). Facts for the diagnosis are recorded too:
stochastic calls, loss reductions, the initial weights, and (migrated) whether
the processes' trained parameters still agree, and (``--rounding-out``, the
original) the elements whose gradients were rounding alone, which the migrated
run (``--rounding``) checksums apart as the original does. A failure of the
script is printed once, between markers, without this runner's frames and with the user's file and
line numbers (``--display-path``, ``--line-map``).
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

from accel_migrate.verify import facts as _facts
from accel_migrate.verify.compare import ROUNDING_GRADIENT
from accel_migrate.verify.seeds import Seeds
from accel_migrate.verify.stochastic import BatchPosition, Stochastic


class StopVerification(BaseException):
    """Raised after the last recorded step; not an error."""


class Recorder:
    def __init__(
        self,
        steps: int,
        mode: str,
        deterministic: bool = False,
        rounding: list[torch.Tensor | None] | None = None,
    ) -> None:
        self.steps = steps
        self.deterministic = deterministic
        self.mode = mode
        self.losses: list[float] = []
        self.loss_steps: list[int] = []
        self.completed = 0
        self.optimizers: list[torch.optim.Optimizer] = []
        self.facts: dict[str, Any] = {
            "batchnorm_training": False,
            "batchnorm_per_process": False,
            "dropout_training": False,
        }
        self.batch_size: int | None = None
        self.stochastic = Stochastic(
            deterministic, step=lambda: self.completed, position=self.position
        )
        self.losses_seen = _facts.LossFacts()
        self.seeds = Seeds(step=lambda: self.completed)
        self.initial: list[dict[str, Any]] | None = None
        self.trained: _facts.TrainedLeaves = _facts.TrainedLeaves()
        #: Per optimizer (by id), per parameter: the largest size of each of its
        #: gradient's entries over the steps (the original's run only).
        self.sizes: dict[int, list[torch.Tensor | None]] = {}
        #: Per parameter, in ``parameters``' order: the elements whose gradients
        #: were rounding alone in the original (``rounding_masks``), read by the
        #: migrated run from the original's recording.
        self.rounding = rounding

    def position(self) -> BatchPosition:
        """Where this process's samples sit in the current global batch."""
        if self.mode == "migrated":
            share = _facts.batch_share()
            if share is not None:
                return share
        return BatchPosition(0, self.batch_size)

    def on_batch(self, batch: Any) -> None:
        self.batch_size = _facts.leading_size(batch)
        self.stochastic.training = True

    # -- hooks -------------------------------------------------------------------------
    def on_loss(self, value: float, loss: torch.Tensor | None = None) -> None:
        if loss is not None and not self.losses:
            self.trained.remember(loss)
        elif loss is not None and self.completed == 1:
            self.trained.seen_later(loss)
        self.losses.append(value)
        self.loss_steps.append(self.completed)

    def before_step(self, optimizer: torch.optim.Optimizer, *_: Any) -> None:
        if self.initial is None:  # the weights the first update starts from
            self.initial = _facts.checksums(optimizer)
        if self.mode == "original":
            now = _facts.gradient_sizes(optimizer)
            seen = self.sizes.get(id(optimizer), now)
            if len(seen) == len(now):
                self.sizes[id(optimizer)] = [
                    _larger(a, b) for a, b in zip(seen, now, strict=True)
                ]

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
            # The runtime's global-batch layers (and torch's SyncBatchNorm)
            # normalise by the whole batch; any other, by this process's share.
            if not getattr(module, "_accel_synced", False) and not isinstance(
                module, torch.nn.SyncBatchNorm
            ):
                self.facts["batchnorm_per_process"] = True
        if isinstance(module, torch.nn.modules.dropout._DropoutNd) and module.p > 0:
            self.facts["dropout_training"] = True
        if isinstance(module, torch.nn.RNNBase) and module.dropout > 0:
            self.facts["dropout_training"] = True

    # -- results -----------------------------------------------------------------------
    def parameters(self) -> list[dict[str, Any]]:
        """Per parameter, in optimizer order: numel, sum and sum of squares (fp64),
        and those of its elements the loss reads (``traced``) where ``rounding``
        tells them."""
        rows: list[dict[str, Any]] = []
        for optimizer in self.optimizers:
            masks = self.rounding[len(rows) :] if self.rounding is not None else None
            rows += _facts.checksums(optimizer, masks)
        return rows

    def peaks(self) -> list[float]:
        """Per parameter, in ``parameters``' order: its largest gradient entry."""
        return [
            float(size.max()) if size is not None and size.numel() else 0.0
            for o in self.optimizers
            for size in self.sizes.get(id(o), [])
        ]

    def rounding_masks(self) -> list[torch.Tensor | None]:
        """Per parameter, in ``parameters``' order (the original's run): the
        elements whose largest gradient over the steps was at most
        ``ROUNDING_GRADIENT`` of the run's largest (None: a parameter without
        such elements). Nothing the loss reads depends on them (a key bias,
        which softmax ignores; a bias before a normalization layer)."""
        sizes = [size for o in self.optimizers for size in self.sizes.get(id(o), [])]
        top = max(
            (float(s.max()) for s in sizes if s is not None and s.numel()), default=0.0
        )
        if top <= 0 or len(sizes) != sum(
            len(group["params"]) for o in self.optimizers for group in o.param_groups
        ):
            return []
        masks: list[torch.Tensor | None] = []
        for size in sizes:
            mask = None if size is None else size <= ROUNDING_GRADIENT * top
            masks.append(mask if mask is not None and bool(mask.any()) else None)
        return masks

    def result(self, stopped: bool) -> dict[str, Any]:
        facts = {
            **self.facts,
            **self.stochastic.facts(),
            **self.losses_seen.facts(),
            "deterministic": self.deterministic,
        }
        if self.mode == "migrated":
            stepped = {
                id(p)
                for optimizer in self.optimizers
                for group in optimizer.param_groups
                for p in group["params"]
            }
            facts["ranks_disagree"] = self.trained.disagreement(stepped)
            facts["seeds_apart"] = self.seeds.apart()
        return {
            "mode": self.mode,
            "steps": self.completed,
            "stopped": stopped,
            "losses": self.losses,
            "loss_steps": self.loss_steps,
            "parameters": self.parameters(),
            "initial_parameters": self.initial or [],
            "gradient_peaks": self.peaks(),
            "step_bounds": [b for o in self.optimizers for b in _facts.step_bounds(o)],
            "facts": facts,
        }


def _larger(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
    if a is None or b is None:
        return b if a is None else a
    return torch.maximum(a, b) if a.shape == b.shape else b


def _install(recorder: Recorder) -> None:
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    register_optimizer_step_pre_hook(recorder.before_step)
    register_optimizer_step_post_hook(recorder.on_step)
    torch.nn.modules.module.register_module_forward_pre_hook(recorder.on_forward)
    recorder.stochastic.install()
    recorder.losses_seen.install()
    recorder.seeds.install()
    next_batch = _BaseDataLoaderIter.__next__

    def __next__(self: Any) -> Any:
        batch = next_batch(self)
        recorder.on_batch(batch)
        return batch

    _BaseDataLoaderIter.__next__ = __next__  # type: ignore[method-assign]
    if recorder.mode == "original":
        original_backward = torch.Tensor.backward

        def backward(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.numel() == 1:
                recorder.on_loss(float(self.detach()), self)
            return original_backward(self, *args, **kwargs)

        torch.Tensor.backward = backward  # type: ignore[method-assign]
    else:
        import accel_migrate.runtime as accel

        original = accel.backward

        def accel_backward(loss: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            # combined as backward weights it: a token mean's count= (or a sum's
            # reduction=) changes each rank's share of the global loss
            reduction, count = kwargs.get("reduction"), kwargs.get("count")
            value = accel.global_loss(loss, reduction, count)
            recorder.on_loss(float(value.detach()), loss)
            return original(loss, *args, **kwargs)

        accel.backward = accel_backward  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="accel_migrate.verify.runner")
    parser.add_argument("--record", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--mode", choices=["original", "migrated"], required=True)
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--display-path", default=None)
    parser.add_argument("--line-map", default=None)
    # the original's record of its rounding elements (--rounding-out of its run)
    parser.add_argument("--rounding", default=None)
    parser.add_argument("--rounding-out", default=None)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    script_args = options.args[1:] if options.args[:1] == ["--"] else options.args

    rounding = (
        torch.load(options.rounding, weights_only=True)
        if options.rounding and Path(options.rounding).exists()
        else None
    )
    recorder = Recorder(options.steps, options.mode, options.deterministic, rounding)
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
    except Exception as error:  # the script's own failure: show it as the user's
        line_map = (
            json.loads(Path(options.line_map).read_text()) if options.line_map else {}
        )
        sys.stderr.write(
            _facts.user_traceback(
                error,
                script,
                Path(options.display_path) if options.display_path else script,
                {int(k): (v[0], bool(v[1])) for k, v in line_map.items()},
            )
        )
        sys.stderr.flush()
        return 1
    if options.rounding_out and options.mode == "original":
        # the original's own parameters are checksummed with them too
        recorder.rounding = recorder.rounding_masks()
        if any(mask is not None for mask in recorder.rounding):
            torch.save(recorder.rounding, options.rounding_out)
    result = recorder.result(stopped)
    if int(os.environ.get("RANK", "0")) == 0:
        Path(options.record).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
