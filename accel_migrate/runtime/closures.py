"""``optimizer.step(closure)``: the closure's loss is the global batch's.

An optimizer that takes a closure (``torch.optim.LBFGS``; any optimizer may be
handed one) calls it to re-evaluate the loss, and some decide on the value it
returns: L-BFGS stops its inner iterations when the loss changes by less than
``tolerance_change``, and its strong-Wolfe line search compares losses at trial
points. Under a sharded loader each rank's closure returns the loss of its own
share. Decided on that, the ranks take different numbers of closure calls (so
different numbers of gradient all-reduces: the job hangs in the next one) and
different steps (the replicas drift apart), and the loss ``step`` returns, which
scripts print, is one rank's share.

So a prepared optimizer's ``step`` wraps the closure it is given: the closure
runs as written (its ``accel.backward`` averages the gradients) and its loss
comes back as ``accel.global_loss(loss)``, the same value on every rank and the
original's up to float rounding. The decisions are then taken alike everywhere,
on the original's value. A closure that returns no loss returns None, as
before; one that returns something other than a tensor (``loss.item()``) cannot
be combined without knowing its reduction and is refused loudly.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch


class ClosureLossError(TypeError):
    """A closure handed to a prepared optimizer's ``step`` returned a value the
    runtime cannot make the global batch's."""


def global_closures(optimizer: torch.optim.Optimizer) -> None:
    """Make the loss of every closure handed to ``optimizer.step`` global."""
    original = optimizer.step

    def step(opt: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]):
            args = (_global_closure(args[0]), *args[1:])
        elif callable(kwargs.get("closure")):
            kwargs["closure"] = _global_closure(kwargs["closure"])
        return original(*args, **kwargs)

    # A bound method, as LR schedulers expect when they wrap `step` in turn.
    optimizer.step = types.MethodType(step, optimizer)  # type: ignore[method-assign]


def _global_closure(closure: Callable[[], Any]) -> Callable[[], Any]:
    from .api import global_loss

    @functools.wraps(closure)
    def wrapped() -> Any:
        loss = closure()
        if loss is None:
            return None
        if not isinstance(loss, torch.Tensor):
            raise ClosureLossError(
                f"optimizer.step(closure): the closure returned a "
                f"{type(loss).__name__}, not the loss tensor. Optimizers such as "
                f"LBFGS decide on the value a closure returns, and under a sharded "
                f"loader each process's value is the loss of its own share of the "
                f"batch: return the loss tensor given to accel.backward, which the "
                f"runtime then makes the global batch's loss"
            )
        return global_loss(loss)

    return wrapped
