"""Defence in depth: the first step refuses parameters that no prepared model owns.

The codemod can miss a model (built by a factory in another file, stored in a
dict...). The script then still runs at world size N: its loader is sharded and
its backward rewritten, but the missed model's gradients are never averaged, so
every process trains its own copy on its own share of the data, rank 0 saves
one of them, and nothing complains. These checks catch that at the first step:

- the first ``accel.backward`` walks the loss's autograd graph to its leaves
  (``AccumulateGrad`` nodes) and looks for ``nn.Parameter`` leaves that belong to
  no prepared model and that an optimizer will update;
- the first ``step()`` of each prepared optimizer looks for parameters with a
  gradient that belong to no prepared model, and for prepared parameters whose
  gradients differ between the processes: those were computed, in whole or in
  part, outside the runtime and outside the prepared model's backward
  (``torch.autograd.grad(...)`` written into ``p.grad`` by hand, as PCGrad's
  gradient surgery does, or added to it after an ``accel.backward``), and no
  process averaged them (``UnsyncedGradientsError``). A plain
  ``loss.backward()`` through the prepared forward, and ``accel.backward``, are
  averaged by the strategy and pass: after them every process holds the same
  gradients.

Each check runs once, at world size > 1 only, and the ranks agree through one
collective, so every rank raises the same error and none waits for the others.
A parameter no optimizer holds (a frozen-by-convention perceptual-loss network)
is left alone: its gradient is never applied. The backward check looks at
``nn.Parameter`` leaves only: a plain tensor with ``requires_grad`` in the graph
may be data (an adversarial perturbation made each step, an image optimised by
style transfer). The step check sees every tensor the prepared optimizer holds,
so a plain one of no module that it steps (``w = torch.zeros(1,
requires_grad=True)``, ``SGD([w, b])``; the codemod reports these, AM031) is
refused there, with the fix for a tensor: make it a module's parameter.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from .module import PreparedModule
from .strategies.base import optimizers_holding

if TYPE_CHECKING:
    from ._state import Runtime

_FIX = (
    "wrap the model with accel.prepare_model(...) where it is built, "
    "before its optimizer is created"
)
_FIX_TENSOR = (
    "make each an nn.Parameter of a module the script prepares "
    "(model.name = nn.Parameter(...) before accel.prepare_model(...), or a small "
    "nn.Module that holds them)"
)
#: The strategy's wrappers of a user's module: the module is named, not them.
_WRAPPERS = (nn.parallel.DistributedDataParallel, nn.DataParallel)
#: Parameter names listed per module before "and N more".
_NAMES_SHOWN = 4


class UnpreparedParametersError(RuntimeError):
    """Parameters of no prepared model would be trained, unsynchronised, on every rank."""


# -- which parameters are prepared -------------------------------------------------------
def prepared_parameters(runtime: Runtime) -> set[torch.Tensor]:
    """Every parameter object of the prepared models, as they are now.

    FSDP replaces a module's parameters with sharded ones, and its forward and
    backward use yet other objects (the gathered, unsharded parameters): those
    are the leaves a loss's graph reaches, so they are collected too.
    """
    found: set[torch.Tensor] = set()
    for model in runtime.modules():
        original = model.original_module
        found.update(original.parameters())
        for sub in original.modules():
            found.update(_fsdp_unsharded(sub))
    return found


def _fsdp_unsharded(module: nn.Module) -> Iterable[torch.Tensor]:
    get_state = getattr(module, "_get_fsdp_state", None)
    if get_state is None:
        return ()
    # torch's FSDP2 internals (torch 2.13): read defensively, so that a later
    # torch that moves them makes the check miss, never refuse a correct run.
    try:
        group = get_state()._fsdp_param_group
        params = group.fsdp_params if group is not None else []
        return [
            unsharded
            for fsdp_param in params
            if (unsharded := getattr(fsdp_param, "_unsharded_param", None)) is not None
        ]
    except Exception:
        return ()


def _fsdp_unreadable(runtime: Runtime) -> bool:
    """FSDP is in use but its unsharded parameters could not be found."""
    for model in runtime.modules():
        for sub in model.original_module.modules():
            if hasattr(sub, "_get_fsdp_state") and not list(_fsdp_unsharded(sub)):
                return True
    return False


def graph_parameters(
    losses: torch.Tensor | Sequence[torch.Tensor],
) -> list[nn.Parameter]:
    """The ``nn.Parameter`` leaves that a backward from ``losses`` gives gradients to."""
    return [t for t in graph_leaves(losses) if isinstance(t, nn.Parameter)]


def graph_leaves(
    losses: torch.Tensor | Sequence[torch.Tensor],
) -> list[torch.Tensor]:
    """Every leaf tensor (parameter or plain) a backward from ``losses`` gives a
    gradient to."""
    return [t for t in accumulated_tensors(losses) if t.requires_grad]


def accumulated_tensors(
    losses: torch.Tensor | Sequence[torch.Tensor],
) -> list[torch.Tensor]:
    """The tensors of the ``AccumulateGrad`` nodes of ``losses``'s autograd graph
    (one walk of it, depth first), where a backward accumulates gradients."""
    if isinstance(losses, torch.Tensor):
        losses = [losses]
    roots = [t.grad_fn for t in losses if t.grad_fn is not None]
    seen: set[Any] = set(roots)
    stack = list(roots)
    found: list[torch.Tensor] = []
    while stack:
        node = stack.pop()
        variable = getattr(node, "variable", None)  # AccumulateGrad
        if isinstance(variable, torch.Tensor):
            found.append(variable)
        for next_node, _ in node.next_functions:
            if next_node is not None and next_node not in seen:
                seen.add(next_node)
                stack.append(next_node)
    return found


# -- naming them ---------------------------------------------------------------------------
def describe(params: list[torch.Tensor]) -> str:
    """``Discriminator (model.0.weight, model.0.bias)``: the modules that own ``params``.

    Only called on the way to an error, so a scan of every live module is fine.
    """
    wanted = {id(p): p for p in params}
    modules = [
        obj
        for obj in gc.get_objects()
        if issubclass(type(obj), nn.Module)
        and not isinstance(obj, (PreparedModule, *_WRAPPERS))
    ]
    children = {id(child) for m in modules for child in m.children()}
    owners: dict[str, list[str]] = {}
    named: set[int] = set()
    for module in modules:
        if id(module) in children:
            continue  # named through the module that holds it
        names = []
        for name, p in module.named_parameters():
            if id(p) in wanted and id(p) not in named:
                names.append(name)
                named.add(id(p))
        if names:
            owners.setdefault(type(module).__name__, []).extend(names)
    parts = []
    for owner, names in owners.items():
        shown = ", ".join(names[:_NAMES_SHOWN])
        more = len(names) - _NAMES_SHOWN
        parts.append(f"{owner} ({shown}{f', and {more} more' if more > 0 else ''})")
    loose = [p for key, p in wanted.items() if key not in named]
    for kind, tensors in (
        ("nn.Parameter(s)", [p for p in loose if isinstance(p, nn.Parameter)]),
        (
            "plain tensor(s) with requires_grad",
            [p for p in loose if not isinstance(p, nn.Parameter)],
        ),
    ):
        if tensors:
            shapes = ", ".join(str(tuple(p.shape)) for p in tensors[:_NAMES_SHOWN])
            parts.append(f"{len(tensors)} {kind} of no module, shape {shapes}")
    return "; ".join(parts)


def _fix(params: list[torch.Tensor]) -> str:
    """What to do: a plain tensor cannot be wrapped, only made a parameter."""
    if all(isinstance(p, nn.Parameter) for p in params):
        return _FIX
    return f"{_FIX}; for a tensor of no module, {_FIX_TENSOR}"


class UnsyncedGradientsError(RuntimeError):
    """A prepared optimizer's first step found gradients of prepared parameters
    that no ``accel.backward`` computed, so no process averaged them."""


def _agree(runtime: Runtime, message: str | None) -> None:
    """Raise ``message`` (the first rank's that has one) on every rank, or on none."""
    flag = torch.tensor([1.0 if message else 0.0])
    if not runtime.comm.all_reduce(flag, "max").item():
        return
    messages = runtime.comm.all_gather_object(message)
    first = next(m for m in messages if m)
    raise UnpreparedParametersError(first)


# -- the checks -----------------------------------------------------------------------------
def check_backward(runtime: Runtime, losses: Sequence[torch.Tensor]) -> None:
    """Before the first ``accel.backward`` at world size > 1."""
    runtime.backward_guarded = True
    message = None
    leaves = graph_parameters(losses)
    if leaves:
        prepared = prepared_parameters(runtime)
        stray = [p for p in leaves if p not in prepared]
        if stray and not (
            runtime.strategy.shards_parameters and _fsdp_unreadable(runtime)
        ):
            updated = _held_by_optimizers(stray)
            if updated:
                message = (
                    f"accel.backward: the loss reaches parameters that belong to no "
                    f"prepared model, and an optimizer updates them: "
                    f"{describe(updated)}. Their gradients are not averaged across the "
                    f"{runtime.env.world_size} processes, so every process would train "
                    f"its own copy on its own share of the data. Fix: {_FIX}"
                )
    _agree(runtime, message)


def _held_by_optimizers(params: list[nn.Parameter]) -> list[nn.Parameter]:
    wanted = set(params)
    held = {
        p
        for optimizer in optimizers_holding(wanted)
        for group in optimizer.param_groups
        for p in group["params"]
        if p in wanted
    }
    return [p for p in params if p in held]


def guard_first_step(runtime: Runtime, optimizer: torch.optim.Optimizer) -> None:
    """Check the prepared ``optimizer`` at its first step, then remove the hook."""
    handle: Any = None

    def hook(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        handle.remove()  # once: later steps pay nothing
        check_step(runtime, opt)

    handle = optimizer.register_step_pre_hook(hook)


def check_step(runtime: Runtime, optimizer: torch.optim.Optimizer) -> None:
    if runtime.strategy.wraps_optimizer:
        # Its parameters are the engine's partitions now; the strategy checked
        # them against the model's before building the engine (the same answer
        # on every rank, so no rank waits in _agree).
        return
    prepared = prepared_parameters(runtime)
    stray = []
    seen: set[int] = set()
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None and p not in prepared and id(p) not in seen:
                seen.add(id(p))
                stray.append(p)
    message = None
    if stray:
        message = (
            f"{type(optimizer).__name__}.step(): this prepared optimizer updates "
            f"parameters that belong to no prepared model: {describe(stray)}. Their "
            f"gradients are not averaged across the {runtime.env.world_size} "
            f"processes, so every process would train its own copy on its own share "
            f"of the data. Fix: {_fix(stray)}"
        )
    _agree(runtime, message)
    if not runtime.strategy.shards_parameters:
        # Also after an accel.backward: a gradient added by hand beside it.
        # Decided from gathered checksums: the same answer on every rank.
        unsynced = _unsynced(runtime, optimizer, prepared)
        if unsynced is not None:
            raise UnsyncedGradientsError(unsynced)


def _unsynced(
    runtime: Runtime, optimizer: torch.optim.Optimizer, prepared: set[torch.Tensor]
) -> str | None:
    """Gradients of prepared parameters at the first step that differ between
    the processes: nothing averaged them (or a part of them, added by hand after
    an accel.backward).

    A plain ``loss.backward()`` through a prepared model's forward is averaged
    by the strategy's wrapper (DDP's reducer) all the same, and its gradients
    are then equal on every process: only a difference is refused. Made by
    every rank together: one all-reduce, and a gather where a rank has any."""
    seen: set[int] = set()
    params: list[torch.Tensor] = []
    sums: list[tuple[float, float] | None] = []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p in prepared and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
                grad = p.grad
                if grad is not None and grad.is_sparse:
                    # an nn.Embedding(sparse=True)'s: its rows' values (sparse
                    # tensors have no elementwise comparison)
                    grad = grad.coalesce().values()
                # zeroed (set_to_none=False) or None: no gradient yet
                if grad is None or not bool(grad.ne(0).any()):
                    sums.append(None)
                else:
                    values = grad.detach().double()
                    sums.append((float(values.sum()), float(values.square().sum())))
    flag = torch.tensor([1.0 if any(sums) else 0.0])
    if not runtime.comm.all_reduce(flag, "max").item():
        return None
    every = runtime.comm.all_gather_object(sums)
    found = [
        p
        for index, p in enumerate(params)
        if any(
            not isinstance(other, list)
            or len(other) != len(sums)
            or _differ(sums[index], other[index])
            for other in every
        )
    ]
    if not found:
        return None
    return (
        f"{type(optimizer).__name__}.step(): the gradients of {describe(found)} "
        f"differ between the {runtime.env.world_size} processes at the first step: "
        f"no process averaged them. They (or a part of them) were not computed by "
        f"accel.backward or by a backward through the prepared model's forward: "
        f"torch.autograd.grad(...) written or added into p.grad by hand, as "
        f"gradient surgery (PCGrad) does, or a backward through accel.unwrap(model). Each "
        f"process would step its own copy of the model on its own share of the "
        f"data. Fix: compute the gradients with accel.backward(loss), or average "
        f"each gradient across the processes (accel.reduce(g) / accel.world_size() "
        f"where every process holds as many samples) before using it"
    )


def _differ(
    mine: tuple[float, float] | None, other: tuple[float, float] | None
) -> bool:
    if mine is None or other is None:
        return mine is not other
    scale = max(abs(mine[1]), 1e-30)
    return (
        abs(mine[0] - other[0]) > 1e-6 * scale**0.5
        or abs(mine[1] - other[1]) > 1e-6 * scale
    )
