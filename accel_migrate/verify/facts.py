"""What the runner records besides the losses, for ``compare``'s diagnosis, and how
it shows a failure of the script as the user's own."""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ..runtime.guards import accumulated_tensors
from . import FAILURE_END, FAILURE_START
from .stochastic import BatchPosition

#: Loss functions (``nn.*Loss`` modules call these) and whether they take ignore_index.
_LOSSES = {
    "cross_entropy": True,
    "nll_loss": True,
    "mse_loss": False,
    "l1_loss": False,
    "smooth_l1_loss": False,
    "huber_loss": False,
    "binary_cross_entropy": False,
    "binary_cross_entropy_with_logits": False,
    "kl_div": False,
}


def checksums(
    optimizer: torch.optim.Optimizer, rounding: list[torch.Tensor | None] | None = None
) -> list[dict[str, Any]]:
    """Per parameter of ``optimizer``: numel, sum and sum of squares (fp64). With
    ``rounding`` (per parameter, in this order: a mask of the elements whose
    gradients were rounding alone in the original's run), ``traced`` too: the
    same over the other elements, those the loss reads."""
    rows = []
    # Run as a script: the runtime is there only if the migrated copy loaded it.
    state = sys.modules.get("accel_migrate.runtime._state")
    runtime = state.peek_runtime() if state is not None else None
    # Under DeepSpeed param_groups hold the engine's flat partitions.
    engine_view = runtime.strategy.full_parameters(optimizer) if runtime else None
    groups = (
        [{"params": engine_view}] if engine_view is not None else optimizer.param_groups
    )
    index = 0
    for group in groups:
        for param in group["params"]:
            full = param.detach()
            if hasattr(full, "full_tensor"):  # an FSDP shard: gather (collective)
                full = full.full_tensor()
            values = full.double()
            row = _checksum(values)
            mask = rounding[index] if rounding and index < len(rounding) else None
            if mask is not None and mask.numel() == values.numel():
                row["traced"] = _checksum(
                    values.reshape(-1)[~mask.reshape(-1).to(values.device)]
                )
            rows.append(row)
            index += 1
    return rows


def _checksum(values: torch.Tensor) -> dict[str, Any]:
    return {
        "numel": int(values.numel()),
        "sum": float(values.sum()),
        "sumsq": float((values * values).sum()),
    }


#: Optimizers whose step moves each element by at most about ``lr``, whatever
#: its gradient's size (a gradient of rounding or of bf16 noise included).
_LR_BOUNDED = ("Adam", "AdamW", "Adamax", "NAdam", "RAdam")


def step_bounds(optimizer: torch.optim.Optimizer) -> list[float]:
    """Per parameter of ``optimizer``, in ``checksums``' order: how far one step
    moves each of its elements at most (its group's ``lr``) where the optimizer
    is of Adam's kind, else 0.0 (unbounded: a step follows the gradient)."""
    bounded = any(
        isinstance(optimizer, getattr(torch.optim, name, ())) for name in _LR_BOUNDED
    )
    return [
        float(group.get("lr", 0.0)) if bounded else 0.0
        for group in optimizer.param_groups
        for _ in group["params"]
    ]


def gradient_sizes(optimizer: torch.optim.Optimizer) -> list[torch.Tensor | None]:
    """Per parameter of ``optimizer``, in ``checksums``' order: the absolute value
    of each entry of its gradient now (None without one). Plain tensors only (the
    original's run): a sharded gradient would need a collective."""
    sizes: list[torch.Tensor | None] = []
    for group in optimizer.param_groups:
        for param in group["params"]:
            grad = param.grad
            if grad is None or grad.is_sparse or hasattr(grad, "full_tensor"):
                sizes.append(None)
                continue
            sizes.append(grad.detach().abs().float().cpu())
    return sizes


def gradient_peaks(optimizer: torch.optim.Optimizer) -> list[float]:
    """Per parameter of ``optimizer``, in ``checksums``' order: the largest
    absolute entry of its gradient now (0.0 without one)."""
    return [
        float(size.max()) if size is not None and size.numel() else 0.0
        for size in gradient_sizes(optimizer)
    ]


def leading_size(batch: Any) -> int | None:
    """The first dimension of the batch's first tensor: its number of samples."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else None
    values = batch.values() if isinstance(batch, Mapping) else batch
    if isinstance(values, (list, tuple)) or isinstance(batch, Mapping):
        for value in values:
            size = leading_size(value)
            if size is not None:
                return size
    return None


def batch_share() -> BatchPosition | None:
    """The runtime's share of the current global batch, as [offset, offset + size)."""
    from accel_migrate.runtime import _state
    from accel_migrate.runtime.data import chunk_bounds

    runtime = _state._RUNTIME
    share = None if runtime is None else runtime._batch_share
    if share is None:
        return None
    local, total = share
    lo, _ = chunk_bounds(total, runtime.env.world_size, runtime.env.rank)
    return BatchPosition(lo, local)


@dataclass
class LossFacts:
    """Loss reductions that a per-sample-mean weighting does not reproduce."""

    sum_reduction: int = 0
    ignored_targets: int = 0
    calls: int = 0

    def facts(self) -> dict[str, Any]:
        return {
            "sum_reduction": self.sum_reduction,
            "ignored_targets": self.ignored_targets,
        }

    def install(self) -> None:
        for name, ignores in _LOSSES.items():
            setattr(F, name, self._wrap(getattr(F, name), ignores))

    def _wrap(self, original: Callable[..., Any], ignores: bool) -> Any:
        @functools.wraps(original)
        def loss(*args: Any, **kwargs: Any) -> Any:
            reduction = kwargs.get("reduction", "mean")
            if reduction == "sum":
                self.sum_reduction += 1
            if ignores and reduction == "mean" and len(args) > 1:
                target, index = args[1], kwargs.get("ignore_index", -100)
                if (
                    isinstance(target, torch.Tensor)
                    and not target.is_floating_point()
                    and bool((target == index).any())
                ):
                    self.ignored_targets += 1
            return original(*args, **kwargs)

        return loss


@dataclass
class TrainedLeaves:
    """The leaves the first recorded loss trains; at the end, do ranks agree on them?"""

    leaves: list[torch.Tensor] = field(default_factory=list)
    #: Ids of the leaves of the losses of a later step (None: none was seen).
    later: set[int] | None = None

    def remember(self, loss: torch.Tensor) -> None:
        self.leaves = _leaves(loss)

    def seen_later(self, loss: torch.Tensor) -> None:
        """``loss`` is of a later step: its leaves are the state kept across steps."""
        if self.later is None:
            self.later = set()
        self.later.update(id(t) for t in _leaves(loss))

    def compared(self, stepped: set[int] | None = None) -> list[torch.Tensor]:
        """The leaves ``disagreement`` compares (see there)."""
        # FSDP's unsharded parameters (the leaves of its all-gathered forward)
        # have their storage freed (resized to 0) after resharding: reading one
        # crashes the process. They are synchronised by construction.
        return [
            t
            for t in self.leaves
            if _has_storage(t)
            and (
                isinstance(t, torch.nn.Parameter)
                or (stepped is not None and id(t) in stepped)
                or self.later is None
                or id(t) in self.later
            )
        ]

    def disagreement(self, stepped: set[int] | None = None) -> str | None:
        """A description of the first trained tensor that differs between ranks.

        A plain tensor that the first loss differentiates is compared when an
        optimizer steps it (``stepped``: their ids) or a later step's loss
        differentiates it again (a tensor trained by hand); otherwise it was
        made for that step (a gradient penalty's ``interpolates``), from each
        process's own samples, and is not compared. Parameters always are."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return None
        if dist.get_world_size() < 2:
            return None
        leaves = self.compared(stepped)
        mine = [
            (
                tuple(t.shape),
                float(t.detach().double().sum()),
                float(t.detach().double().square().sum()),
            )
            for t in leaves
        ]
        every: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        for index, values in enumerate(zip(*every, strict=False)):
            first = values[0]
            if any(_apart(first, other) for other in values[1:]):
                leaf = leaves[index]
                kind = "parameter" if isinstance(leaf, torch.nn.Parameter) else "tensor"
                return f"a trained {kind} of shape {tuple(leaf.shape)}"
        return None


def _leaves(loss: torch.Tensor) -> list[torch.Tensor]:
    """The tensors whose gradients ``loss``'s backward accumulates."""
    return [
        t
        for t in accumulated_tensors(loss)
        # FSDP shards: synchronised by construction
        if not hasattr(t, "full_tensor")
    ]


def _has_storage(tensor: torch.Tensor) -> bool:
    """Does ``tensor`` hold its elements (not a storage resized to 0)?"""
    if tensor.numel() == 0:
        return True
    needed = (tensor.storage_offset() + tensor.numel()) * tensor.element_size()
    return tensor.untyped_storage().nbytes() >= needed


def _apart(a: tuple[Any, float, float], b: tuple[Any, float, float]) -> bool:
    if a[0] != b[0]:
        return True
    scale = max(a[2], 1e-12) ** 0.5
    return abs(a[1] - b[1]) > 1e-6 * scale or abs(a[2] - b[2]) > 1e-6 * max(a[2], 1e-12)


def user_traceback(
    error: BaseException,
    script: Path,
    display: Path,
    line_map: dict[int, tuple[int, bool]],
) -> str:
    """``error``'s traceback from the script's first frame on, the runner's frames
    left out, and the migrated copy's file and line numbers given as the user's
    (``line_map``: migrated line -> (original line, rewritten by the migration);
    a line the migration added is named as such)."""
    import os

    frames = traceback.extract_tb(error.__traceback__)
    start = next(
        (i for i, f in enumerate(frames) if Path(f.filename) == script), len(frames)
    )
    source = _lines(display)
    out = [f"{FAILURE_START} (rank {os.environ.get('RANK', '0')}) ===\n"]
    out.append("Traceback (most recent call last):\n")
    for frame in frames[start:] or frames:
        filename, line, text = frame.filename, frame.lineno, frame.line
        if Path(filename) == script:
            filename = str(display)
            mapped, rewritten = (
                line_map.get(line or 0, (None, True)) if line_map else (line, False)
            )
            if mapped is None:
                text = f"{text}    # added by the migration (line {line} of the migrated copy)"
            elif rewritten:
                line = mapped
                text = f"{text}    # the migration of this line"
            else:
                line = mapped
                text = source[mapped - 1].strip() if 0 < mapped <= len(source) else text
        out.append(f'  File "{filename}", line {line}, in {frame.name}\n')
        if text:
            out.append(f"    {text}\n")
    out.extend(traceback.format_exception_only(type(error), error))
    out.append(FAILURE_END + "\n")
    return "".join(out)


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []
