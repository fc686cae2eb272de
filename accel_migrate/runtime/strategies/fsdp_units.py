"""Which submodules of a model become FSDP units of their own.

Sharding only the root gathers every parameter for the whole forward and keeps
every gradient full until the end of backward: peak memory per rank is about
DDP's. With one unit per block (as torchtitan shards each transformer block, and
as Accelerate's and Fabric's auto-wrap policies do), a rank holds the full
parameters of one block at a time and its gradients are reduce-scattered block by
block.

The blocks, outermost first, never one inside another:
- with ``fsdp-block-classes``: every submodule of one of those class names;
- else the children of an ``nn.ModuleList``/``nn.Sequential`` of two or more
  children that all have one class and own parameters (a transformer's layers, a
  ResNet stage's residual blocks);
- else, with ``fsdp-min-params`` N > 0: each outermost submodule of at least N
  parameters that is not the whole model.

``describe_units``: the line rank 0 prints when it shards a model.
``checkpoint_block``: activation checkpointing of a block, whose recomputation
leaves BatchNorm's running statistics and spectral normalization's power
iteration as the forward left them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager

import torch
from torch import nn

from ..config import RuntimeConfig


def block_units(model: nn.Module, config: RuntimeConfig) -> list[nn.Module]:
    """The submodules to ``fully_shard`` before the root, in module order."""
    if config.fsdp_wrap == "root":
        return []
    if config.fsdp_block_classes:
        names = set(config.fsdp_block_classes)
        return list(_outermost(model, lambda m: type(m).__name__ in names))
    repeated = set(_repeated_children(model))
    if repeated:
        return list(_outermost(model, lambda m: m in repeated))
    if config.fsdp_min_params > 0:
        return list(
            _outermost(model, lambda m: _size(m) >= config.fsdp_min_params, root=False)
        )
    return []


#: A model with fewer parameters sharded as the root alone, with no option
#: asking for units, is not described (a small head: nothing to gain from units).
QUIET_BELOW = 100_000


def describe_units(
    model: nn.Module, blocks: list[nn.Module], config: RuntimeConfig
) -> str | None:
    """What rank 0 says when it shards ``model``: the units, or why there is
    one; None for a small model sharded as the root alone by default."""
    name = type(model).__name__
    if blocks:
        counts: dict[str, int] = {}
        for block in blocks:
            counts[type(block).__name__] = counts.get(type(block).__name__, 0) + 1
        kinds = ", ".join(f"{n} x {kind}" for kind, n in counts.items())
        return f"{name}: {len(blocks) + 1} FSDP units ({kinds}, and the root)"
    if config.fsdp_wrap == "root":
        return f"{name}: 1 FSDP unit, the root (fsdp-wrap root)"
    given = [
        *(
            [f"--fsdp-block-classes {','.join(config.fsdp_block_classes)}"]
            if config.fsdp_block_classes
            else []
        ),
        *(
            [f"--fsdp-min-params {config.fsdp_min_params}"]
            if config.fsdp_min_params
            else []
        ),
    ]
    gathered = (
        "every parameter is gathered for the whole step (about DDP's peak memory)"
    )
    if given:
        return (
            f"{name}: 1 FSDP unit, the root: the options given ({' '.join(given)}) "
            f"match no module, so {gathered}"
        )
    if _size(model) < QUIET_BELOW:
        return None
    return (
        f"{name}: 1 FSDP unit, the root: no repeated blocks found, so {gathered}; "
        "--fsdp-block-classes NAMES or --fsdp-min-params N make units of its parts"
    )


def _repeated_children(model: nn.Module) -> Iterator[nn.Module]:
    for container in model.modules():
        if not isinstance(container, (nn.ModuleList, nn.Sequential)):
            continue
        children = list(container.children())
        if len(children) < 2 or len({type(c) for c in children}) != 1:
            continue
        if all(_size(c) > 0 for c in children):
            yield from children


def _outermost(model: nn.Module, chosen, root: bool = True) -> Iterator[nn.Module]:  # type: ignore[no-untyped-def]
    """Submodules for which ``chosen`` holds, not descending into a chosen one;
    the model itself only when ``root``."""
    seen: set[int] = set()
    stack = [model] if root else list(reversed(list(model.children())))
    while stack:
        module = stack.pop()
        if id(module) in seen:
            continue  # a module registered twice is one unit
        seen.add(id(module))
        if module is not model and chosen(module):
            yield module
            continue
        stack.extend(reversed(list(module.children())))


def _size(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def checkpoint_block(block: nn.Module) -> None:
    """Activation checkpointing of ``block`` (torch's composable ``checkpoint``):
    its activations are recomputed in backward instead of kept.

    The recomputation runs the block's forward a second time, and state that a
    forward in training mode updates in place would be updated again there:

    - BatchNorm's running statistics: momentum applied twice,
      ``num_batches_tracked`` counted twice, and an eval and a checkpoint that
      differ from the original's with nothing said (a VGG stage, Conv-BN-ReLU, had
      ``num_batches_tracked`` 8 after 4 steps). The recomputation keeps them as the
      forward left them.
    - spectral normalization's power iteration (``torch.nn.utils.spectral_norm``'s
      ``weight_u``/``weight_v``, ``parametrizations.spectral_norm``'s ``_u``/``_v``):
      the recomputation advanced it a second time, so the weight it recomputed was
      divided by another estimate of the spectral norm than the forward's, and the
      gradients were of another function than the loss (a spectral-norm Linear
      block, 3 SGD steps: ``weight_u`` 7.6e-2 and the parameters 1.1e-2 apart from
      the run without checkpointing). The recomputation starts from the vectors the
      forward's weight used, without iterating (the normalization's
      ``n_power_iterations`` 0, for that recomputation only), and leaves them as
      the forward did. No module's ``training`` changes for it: the layer's own
      forward (a BatchNorm or a dropout the layer is) recomputes as it ran.
    - the modules' modes: a forward in eval mode whose backward runs after
      ``model.train()`` (a penalty term) recomputed in training mode (a
      BatchNorm's ``CheckpointError``, or a dropout's masks in the saved
      tensors). The recomputation runs every module in the block in the mode of
      the forward it repeats.
    """
    from torch.distributed._composable import checkpoint

    if any(isinstance(h, _spectral_hook()) for h in block._forward_pre_hooks.values()):
        # Its hook runs before checkpoint's: the forward computes the weight
        # outside the checkpointed region, the recomputation inside it, and
        # torch stops the backward ("Recomputed values ... have different
        # metadata"). Said here, before the first step.
        raise ActivationCheckpointingError(
            f"--activation-checkpointing: the FSDP block {type(block).__name__} is "
            "itself normalized by torch.nn.utils.spectral_norm, whose weight is "
            "computed before the block's checkpointed region begins, and its "
            "recomputation in backward fails. Use "
            "torch.nn.utils.parametrizations.spectral_norm, or make units of the "
            "modules that hold such layers (--fsdp-block-classes), or leave "
            "activation checkpointing off"
        )
    checkpoint(block, context_fn=lambda: _recomputed_alike(block))


class ActivationCheckpointingError(RuntimeError):
    """A block that ``--activation-checkpointing`` cannot recompute as its forward
    ran."""


def _spectral_hook() -> type:
    from torch.nn.utils.spectral_norm import SpectralNorm

    return SpectralNorm


#: A spectral normalization's vectors: (the module that holds them as buffers,
#: their names, what iterates them: the hook or the parametrization, whose
#: ``n_power_iterations`` is the number of iterations a training forward runs).
_Vectors = tuple[nn.Module, tuple[str, str], object]


def _recomputed_alike(block: nn.Module) -> tuple[ContextManager[None], ...]:
    """The forward's and the recomputation's contexts of one checkpointed call
    of ``block`` (``checkpoint``'s ``context_fn``): see ``checkpoint_block``."""
    iterated = _power_iterations(block)
    used: list[list[torch.Tensor]] = []

    # each module's mode as this forward ran (a script may call the model in
    # eval mode and call backward after model.train(): a penalty term)
    modes = [(module, module.training) for module in block.modules()]

    @contextmanager
    def forward() -> Iterator[None]:
        yield
        # the vectors this forward's weight was divided with (the iteration
        # runs in the layer's forward pre-hook, inside the block's forward)
        used[:] = [
            [owner._buffers[n].clone() for n in names] for owner, names, _ in iterated
        ]

    @contextmanager
    def recompute() -> Iterator[None]:
        # The buffers themselves are set aside, not written: the recomputation
        # saves the vectors it divides with for the backward (the hook's
        # eval-mode weight does not clone them), so they are copies of the
        # forward's that nothing changes afterwards.
        # No iteration (0 iterations, not eval mode: the layer's own forward, a
        # BatchNorm's or a dropout's, reads ``training``), from the forward's
        # vectors; every module in the mode the forward ran in.
        kept = [[owner._buffers[n] for n in names] for owner, names, _ in iterated]
        counts = [it.n_power_iterations for _, _, it in iterated]  # type: ignore
        for (owner, names, it), values in zip(iterated, used, strict=False):
            for name, value in zip(names, values, strict=True):
                owner._buffers[name] = value
            it.n_power_iterations = 0  # type: ignore[attr-defined]
        now = [(module, module.training) for module, _ in modes]
        for module, mode in modes:
            module.training = mode
        try:
            with _keep_running_stats(block):
                yield
        finally:
            for module, mode in now:
                module.training = mode
            for (owner, names, it), buffers, count in zip(
                iterated, kept, counts, strict=True
            ):
                it.n_power_iterations = count  # type: ignore[attr-defined]
                for name, buffer in zip(names, buffers, strict=True):
                    owner._buffers[name] = buffer

    return forward(), recompute()


def _power_iterations(block: nn.Module) -> list[_Vectors]:
    """The spectral normalizations in ``block`` that iterate in training mode."""
    from torch.nn.utils.parametrizations import _SpectralNorm

    found: list[_Vectors] = []
    for module in block.modules():
        if isinstance(module, _SpectralNorm) and "_u" in module._buffers:
            found.append((module, ("_u", "_v"), module))
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, _spectral_hook()):
                found.append((module, (f"{hook.name}_u", f"{hook.name}_v"), hook))
    return found


@contextmanager
def _keep_running_stats(block: nn.Module) -> Iterator[None]:
    kept = [
        (buffer, buffer.clone())
        for module in block.modules()
        if isinstance(module, nn.modules.batchnorm._NormBase)
        for buffer in (
            module.running_mean,
            module.running_var,
            module.num_batches_tracked,
        )
        if buffer is not None
    ]
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, value in kept:
                buffer.copy_(value)
