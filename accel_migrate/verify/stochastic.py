"""Stochastic layers under verification: count them, or make them deterministic.

A distributed run draws its dropout masks and per-step random numbers on each
process, for its share of the batch, so its losses match the original's only
statistically. ``verify --deterministic`` runs the original and the migrated copy
with this module installed the same way in both:

- **dropout is the identity**: ``torch.nn.functional.dropout`` and its variants
  (which ``nn.Dropout*`` modules and ``multi_head_attention_forward`` call),
  ``scaled_dot_product_attention``'s ``dropout_p`` and the dropout between RNN
  layers;
- **per-step draws are keyed**: once the first batch has been read, a draw of
  ``torch.randn/rand/randint`` or ``randn_like/rand_like/randint_like`` from the
  global generator is replaced by one from a generator seeded by (optimizer step,
  the draw's number within the step). A draw whose first dimension is the batch
  (the process's share of it) is drawn row by row, each row seeded by its sample's
  position in the *global* batch: rank r's rows are then exactly the rows of the
  original's draw that belong to its samples (a draw ``accel.batch_draw`` makes
  for the whole global batch is keyed from position 0, and the process keeps its
  rows). Other draws are the same on every process, as the original's was one
  draw.

Both runs see the same keyed numbers, so they are not the original script's
numbers: what is compared is the deterministic part of the training. Draws this
module cannot key (``randperm``, ``normal``, ``bernoulli``, ``multinomial``, the
in-place ``Tensor`` draws, Python's and NumPy's generators) are left as they are
and counted, so the verdict can say that they remain.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from ..runtime.batch_draws import global_rows_drawing

_DROPOUTS = (
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
)
_TORCH_DROPOUTS = (
    "dropout",
    "alpha_dropout",
    "feature_dropout",
    "feature_alpha_dropout",
)
_KEYED = ("randn", "rand", "randint", "randn_like", "rand_like", "randint_like")
_UNKEYED = ("randperm", "normal", "bernoulli", "multinomial", "poisson")
_UNKEYED_METHODS = ("normal_", "uniform_", "bernoulli_", "random_", "exponential_")


@dataclass
class BatchPosition:
    """This process's samples of the current global batch: [offset, offset + size)."""

    offset: int = 0
    size: int | None = None


@dataclass
class Stochastic:
    """Counts (and, when ``deterministic``, neutralises) the stochastic calls."""

    deterministic: bool
    step: Callable[[], int]
    position: Callable[[], BatchPosition]
    dropout_calls: int = 0
    draws: dict[str, int] = field(default_factory=dict)
    keyed_draws: int = 0
    unkeyed_draws: dict[str, int] = field(default_factory=dict)
    training: bool = False
    _key_step: int = -1
    _ordinal: int = 0
    _busy: bool = False

    def facts(self) -> dict[str, Any]:
        return {
            "dropout_calls": self.dropout_calls,
            "step_draws": dict(self.draws),
            "keyed_draws": self.keyed_draws,
            "unkeyed_draws": dict(self.unkeyed_draws),
        }

    # -- keys --------------------------------------------------------------------------
    def _next_key(self) -> int:
        step = self.step()
        if step != self._key_step:
            self._key_step, self._ordinal = step, 0
        self._ordinal += 1
        return (step * 1_000_003 + self._ordinal) * 1_000_033

    # -- install -----------------------------------------------------------------------
    def install(self) -> None:
        for name in _DROPOUTS:
            # alpha_dropout and feature_alpha_dropout default to training=False
            default = not name.endswith("alpha_dropout")
            setattr(F, name, self._dropout(getattr(F, name), default))
        for name in _TORCH_DROPOUTS:
            if hasattr(torch, name):
                setattr(
                    torch,
                    name,
                    self._dropout(getattr(torch, name), True, torch_op=True),
                )
        F.scaled_dot_product_attention = self._attention(F.scaled_dot_product_attention)
        torch.nn.modules.module.register_module_forward_pre_hook(self._rnn_hook)
        for name in _KEYED:
            setattr(torch, name, self._draw(name, getattr(torch, name)))
        for name in _UNKEYED:
            setattr(torch, name, self._counted(name, getattr(torch, name)))
        for name in _UNKEYED_METHODS:
            setattr(
                torch.Tensor,
                name,
                self._counted(f"Tensor.{name}", getattr(torch.Tensor, name)),
            )
        # A loader's own draws (its iterator's base seed, a RandomSampler's seed
        # and permutation) choose the order of the data, which the runtime makes
        # the same on every process: no draw of the training step.
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        for name in ("__init__", "_next_index"):
            setattr(
                _BaseDataLoaderIter,
                name,
                self._data_order(getattr(_BaseDataLoaderIter, name)),
            )

    def _dropout(
        self, original: Callable[..., Any], default: bool, torch_op: bool = False
    ) -> Any:
        @functools.wraps(original)
        def dropout(input: Any, *args: Any, **kwargs: Any) -> Any:
            # F.*(input, p=0.5, training=True, inplace=False); torch.*(input, p, train)
            p = kwargs.get("p", args[0] if args else 0.5)
            train = kwargs.get(
                "train" if torch_op else "training",
                args[1] if len(args) > 1 else default,
            )
            if not (train and p):
                return original(input, *args, **kwargs)
            self.dropout_calls += 1
            if self.deterministic:
                return input
            return original(input, *args, **kwargs)

        return dropout

    def _attention(self, original: Callable[..., Any]) -> Any:
        @functools.wraps(original)
        def attention(*args: Any, **kwargs: Any) -> Any:
            p = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
            if p:
                self.dropout_calls += 1
                if self.deterministic:
                    if len(args) > 4:
                        args = (*args[:4], 0.0, *args[5:])
                    else:
                        kwargs["dropout_p"] = 0.0
            return original(*args, **kwargs)

        return attention

    def _rnn_hook(self, module: torch.nn.Module, _inputs: Any) -> None:
        if (
            isinstance(module, torch.nn.RNNBase)
            and module.training
            and module.dropout
            and module.num_layers > 1
        ):
            self.dropout_calls += 1
            if self.deterministic:
                module.dropout = 0.0

    def _data_order(self, original: Callable[..., Any]) -> Any:
        @functools.wraps(original)
        def data_order(*args: Any, **kwargs: Any) -> Any:
            if self._busy:
                return original(*args, **kwargs)
            self._busy = True
            try:
                return original(*args, **kwargs)
            finally:
                self._busy = False

        return data_order

    def _counted(self, name: str, original: Callable[..., Any]) -> Any:
        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.training and not self._busy and kwargs.get("generator") is None:
                self.draws[name] = self.draws.get(name, 0) + 1
                if self.deterministic:
                    self.unkeyed_draws[name] = self.unkeyed_draws.get(name, 0) + 1
            return original(*args, **kwargs)

        return counted

    def _draw(self, name: str, original: Callable[..., Any]) -> Any:
        @functools.wraps(original)
        def draw(*args: Any, **kwargs: Any) -> Any:
            if (
                not self.training
                or self._busy
                or kwargs.get("generator") is not None
                or kwargs.get("out") is not None
            ):
                return original(*args, **kwargs)
            self.draws[name] = self.draws.get(name, 0) + 1
            if not self.deterministic:
                return original(*args, **kwargs)
            self._busy = True
            try:
                result = self._keyed(name, original, args, kwargs)
            finally:
                self._busy = False
            self.keyed_draws += 1
            return result

        return draw

    def _keyed(
        self,
        name: str,
        original: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> torch.Tensor:
        fixed, shape, like = _split(name, args, kwargs)
        device = kwargs.pop("device", None)
        requires_grad = kwargs.pop("requires_grad", False)
        kwargs.pop("pin_memory", None)
        kwargs.pop("layout", None)
        kwargs.pop("memory_format", None)
        if like is not None:
            kwargs.setdefault("dtype", like.dtype)
            device = like.device if device is None else device
        base = name.removesuffix("_like")
        function = _PLAIN[base]
        key = self._next_key()
        position = self.position()
        offset, size = position.offset, position.size
        drawing = global_rows_drawing()
        if drawing is not None:  # accel.batch_draw's draw of the whole global batch
            offset, size = 0, drawing
        generator = torch.Generator()
        if shape and size is not None and shape[0] == size:
            rows = []
            for row in range(shape[0]):
                generator.manual_seed(key + offset + row)
                rows.append(
                    function(*fixed, tuple(shape[1:]), generator=generator, **kwargs)
                )
            value = (
                torch.stack(rows) if rows else function(*fixed, tuple(shape), **kwargs)
            )
        else:
            generator.manual_seed(key)
            value = function(*fixed, tuple(shape), generator=generator, **kwargs)
        if device is not None:
            value = value.to(device)
        return value.requires_grad_(requires_grad) if requires_grad else value


#: The unpatched draws (this module replaces the attributes of ``torch``).
_PLAIN: dict[str, Callable[..., torch.Tensor]] = {
    "randn": torch.randn,
    "rand": torch.rand,
    "randint": torch.randint,
}


def _split(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], tuple[int, ...], torch.Tensor | None]:
    """(leading arguments such as randint's bounds, the shape, the ``*_like`` input)."""
    if name.endswith("_like"):
        like = kwargs.pop("input", None)
        if like is None:
            like, args = args[0], args[1:]
        fixed: tuple[Any, ...] = ()
        if name == "randint_like":
            low = kwargs.pop("low", None)
            high = kwargs.pop("high", None)
            bounds = [*args]
            if high is not None:
                bounds.append(high)
            if low is not None:
                bounds.insert(0, low)
            fixed = (0, bounds[0]) if len(bounds) == 1 else tuple(bounds[:2])
        return fixed, tuple(like.shape), like
    if name == "randint":
        size = kwargs.pop("size", None)
        numbers = [a for a in args if not isinstance(a, (tuple, list, torch.Size))]
        if size is None:
            size = next(a for a in args if isinstance(a, (tuple, list, torch.Size)))
        high = kwargs.pop("high", None)
        low = kwargs.pop("low", None)
        if high is not None:
            numbers.append(high)
        if low is not None:
            numbers.insert(0, low)
        fixed = (0, numbers[0]) if len(numbers) == 1 else tuple(numbers[:2])
        return fixed, tuple(int(s) for s in size), None
    size = kwargs.pop("size", None)
    if size is None:
        size = (
            args[0]
            if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size))
            else args
        )
    return (), tuple(int(s) for s in size), None
