"""Defence in depth: prepared models whose copies drift apart at the first update.

The codemod can miss a parameter update made by hand with gradients that no
process averaged (AM040's shapes, spelled so that the rule does not see them):
``grads = torch.autograd.grad(loss, params)`` then ``p.data -= lr * g``, or
those gradients written into ``p.grad`` and applied with
``p.data.add_(p.grad, alpha=-lr)``. No ``accel.backward`` and no prepared
optimizer runs, so neither of ``guards``' first-step checks does: each process
steps its own copy of the model on its own share of the batch, and nothing
complains.

Whatever the update, the copies of a prepared model must stay equal on every
process (DDP broadcasts rank 0's parameters when it wraps the model, and an
averaged gradient moves them all alike). So this check compares them at the
start of training: at each batch a sharded loader yields (every process
iterates its prepared loaders in step; the loaders' own agreement checks rely
on it), it takes a float64 checksum (sum, sum of squares) of each parameter of
the prepared models whose wrapper is built (at their first forward, which
broadcasts rank 0's parameters). At the first such batch the processes gather
the checksums: the first update, if it ran since, is seen there. After that,
while no process's checksums have moved, the processes agree on that with one
small all-reduce per batch; at the first batch after any moved (an optimizer
step, or an update by hand), they gather them again. Where one parameter
differs between two processes, every process raises
``ParametersDivergedError``, naming the parameters. Then the check is
removed: later batches pay one attribute read.

Not under a strategy that shards the parameters (FSDP, HSDP: each process
holds other shards) or wraps the optimizer (DeepSpeed), and not in a world of
one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ._state import Runtime

#: Relative difference between two processes' checksums of one parameter above
#: which they are taken to differ (equal updates give bitwise-equal copies).
_TOLERANCE = 1e-12


class ParametersDivergedError(RuntimeError):
    """The copies of a prepared model differ between the processes after their
    first update: it was made with gradients no process averaged."""


class DriftCheck:
    """The check's state, held by the runtime until it has run."""

    def __init__(self) -> None:
        self.params: list[torch.Tensor] = []
        self.first: list[float] = []

    def at_batch(self, runtime: Runtime) -> None:
        """At a batch of a sharded loader: see the module docstring."""
        strategy = runtime.strategy
        if strategy.shards_parameters or strategy.wraps_optimizer:
            runtime.drift_check = None
            return
        # the models whose wrapper is built: it broadcast rank 0's parameters
        params = [
            p
            for m in runtime.modules()
            if m.forward_module is not None
            for p in m.original_module.parameters()
        ]
        if not params:
            return
        sums = _checksums(params)
        if len(params) != len(self.params) or any(
            a is not b for a, b in zip(params, self.params, strict=True)
        ):
            # The first batch after a wrapper was built (the same batch on every
            # process): the copies must be equal now. One update may have run
            # since the broadcast, so they are compared right away.
            self.params, self.first = params, sums
            self._compare(runtime, params, sums, done=False)
            return
        moved = any(a != b for a, b in zip(sums, self.first, strict=True))
        flag = torch.tensor([1.0 if moved else 0.0])
        if not runtime.comm.all_reduce(flag, "max").item():
            return
        self._compare(runtime, params, sums, done=True)

    @staticmethod
    def _compare(
        runtime: Runtime, params: list[torch.Tensor], sums: list[float], done: bool
    ) -> None:
        """Gather every process's checksums and raise where they differ."""
        if done:
            runtime.drift_check = None  # checked: later batches pay nothing
        every = runtime.comm.all_gather_object(sums)
        differing = sorted(
            {
                index // 2
                for other in every
                for index, (mine, theirs) in enumerate(zip(sums, other, strict=True))
                if abs(mine - theirs) > _TOLERANCE * max(abs(mine), abs(theirs))
            }
        )
        if differing:
            runtime.drift_check = None
            raise ParametersDivergedError(
                _message(runtime, [params[i] for i in differing])
            )


#: Elements of a parameter summed in float64 at a time: the check must not
#: need memory of its own beyond a few MiB, since a model that fills the device
#: would otherwise fail here, at the first batch (a float64 copy of a large
#: embedding, and its square, is 4x the parameter's own bytes).
_CHUNK = 1 << 22


def _checksums(params: list[torch.Tensor]) -> list[float]:
    """(sum, sum of squares) of each parameter, in float64, flattened; computed
    in chunks of ``_CHUNK`` elements, in the same order on every process."""
    values: list[torch.Tensor] = []
    with torch.no_grad():
        for p in params:
            total = squares = torch.zeros((), dtype=torch.float64, device=p.device)
            for chunk in p.detach().reshape(-1).split(_CHUNK):
                wide = chunk.double()  # one chunk's float64 copy at a time
                total = total + wide.sum()
                squares = squares + torch.dot(wide, wide)
            values += (total, squares)
    return torch.stack(values).cpu().tolist()


def _message(runtime: Runtime, differing: list[torch.Tensor]) -> str:
    from .guards import describe

    return (
        f"the parameters of {describe(differing)} changed differently on the "
        f"{runtime.env.world_size} processes at their first update, so each "
        "process now trains its own copy of the model on its own share of the "
        "data. The update did not use gradients averaged across the processes: "
        "it was made by hand (p.data -= lr * g, p.data.add_(p.grad, alpha=-lr)) "
        "with gradients of torch.autograd.grad(loss, params), or written into "
        "p.grad, which hold this process's share only, or with a backward "
        "through accel.unwrap(model). Fix: compute the gradients with "
        "accel.backward(loss) and step a prepared optimizer "
        "(accel.prepare_optimizer(...)), or average each gradient across the "
        "processes (accel.reduce(g) / accel.world_size(), where every process "
        "holds as many samples) before using it"
    )
