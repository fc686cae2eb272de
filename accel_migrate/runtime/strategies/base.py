"""The strategy interface: how a model is replicated or sharded across processes."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import torch
from torch import nn

from .. import late_registration
from ..comm import Collectives
from ..config import ConfigError, RuntimeConfig
from ..env import DistEnv
from ..precision.base import Precision

_REGISTRY: dict[str, type[Strategy]] = {}


class LateParameterError(RuntimeError):
    """A parameter of a prepared model requires a gradient that the strategy's
    wrapper, built at the model's first forward, does not train (added or
    unfrozen later, under a strategy that cannot take it in)."""


class Strategy:
    """Base strategy. Subclasses register themselves under ``name``."""

    name: ClassVar[str]
    #: Whether the strategy exchanges gradients through a process group.
    distributed: ClassVar[bool] = True
    #: Whether a prepared model's parameters are split across processes (then
    #: the module object itself cannot be pickled whole).
    shards_parameters: ClassVar[bool] = False
    #: Whether ``accel.save_state`` writes each rank's shards (DCP) instead of
    #: gathering full state dicts to rank 0: the state is DTensors.
    sharded_checkpoint: ClassVar[bool] = False
    #: Whether an engine of the strategy replaces a prepared optimizer's parameters
    #: with its own (DeepSpeed's flat partitions): the first-step guard, which
    #: compares them with the models' parameters, is then checked by the strategy.
    wraps_optimizer: ClassVar[bool] = False
    #: Whether a parameter added to a prepared model after its first forward (an
    #: attribute write, ``register_parameter``, ``add_module``) is trained as one
    #: process would train it: DDP averages it and rebuilds its wrapper; a sharded
    #: module or DeepSpeed's engine was built without it (``module.py`` refuses it).
    late_parameters: ClassVar[bool] = False

    #: The strategy-specific settings it reads (``RuntimeConfig`` fields): the
    #: launcher refuses one given as a flag to a strategy that would ignore it.
    settings: ClassVar[frozenset[str]] = frozenset()

    def adopt_late_parameters(self, params: list[Any], call: str) -> None:
        """Parameters added to a prepared model after its wrapper was built, where
        ``late_parameters`` says the strategy takes them in: made equal on every
        process (each process built its own). ``call`` is the statement that
        added them (``model[2].scale = nn.Parameter(...)``)."""

    def adopt_frozen_parameters(self, params: list[Any], call: str) -> None:
        """Parameters that require no gradient, added to a prepared model after
        its wrapper was built (no strategy trains them; none shards them):
        rank 0's values on every process, as the wrapper made those it was
        built with (before r33b each process kept its own draw). Every process
        must run ``call``, the statement that added them: checked first."""
        late_registration.take_rank_0s(
            params,
            call,
            self.env.rank,
            self.env.world_size,
            self.config.timeout,
            self.device,
        )

    def without_grad(self, forward_module: nn.Module) -> Callable[..., Any]:
        """The module that runs a forward with gradients off (an evaluation,
        which may run on some processes only: no collective there)."""
        return forward_module

    def keep_local_buffers(
        self, forward_module: nn.Module | None, names: list[str]
    ) -> None:
        """Buffers (names in the user's module) that a forward registered after
        the wrapper was built: not broadcast from rank 0 (a forward may run on
        some processes only; ``late_registration._keep_local``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            _REGISTRY[cls.name] = cls

    def __init__(
        self,
        env: DistEnv,
        device: torch.device,
        comm: Collectives,
        precision: Precision,
        config: RuntimeConfig | None = None,
    ) -> None:
        self.env = env
        self.device = device
        self.comm = comm
        self.precision = precision
        self.config = config if config is not None else RuntimeConfig()

    @classmethod
    def host_collectives(cls, config: RuntimeConfig) -> bool:
        """Whether collectives also run on CPU tensors on a GPU (a gloo backend
        beside NCCL): true where the strategy keeps shards in host memory."""
        return False

    @classmethod
    def check(cls, env: DistEnv, config: RuntimeConfig) -> None:
        """Refuse a world this strategy cannot run in, repeating what was asked."""
        return None

    # -- models -------------------------------------------------------------------
    def setup_module(self, module: nn.Module) -> nn.Module:
        """Return the module that runs forward (a DDP wrapper, a sharded module...)."""
        return module

    def module_state_dict(self, module: nn.Module) -> dict[str, Any]:
        """The full state dict with the original keys, as the original script had it."""
        return module.state_dict()

    def load_module_state_dict(
        self, module: nn.Module, state: Mapping[str, Any], strict: bool = True
    ) -> Any:
        return module.load_state_dict(state, strict=strict)

    def watch_forward(self, forward_module: nn.Module, output: Any) -> None:
        """See a prepared model's forward output (DDP: which backward uses it)."""
        return None

    def after_backward(self, forward_module: nn.Module) -> nn.Module | None:
        """Called after each ``accel.backward``; may return a wrapper to use instead."""
        return None

    @contextmanager
    def no_sync(self, forward_module: nn.Module | None) -> Iterator[None]:
        """Skip the gradient exchange of the backward passes run inside."""
        yield

    def backward(
        self,
        tensors: torch.Tensor | list[torch.Tensor],
        gradient: Any,
        retain_graph: bool | None,
        create_graph: bool,
        inputs: Any,
    ) -> None:
        """Run the backward pass of ``accel.backward`` (already weighted and scaled)."""
        torch.autograd.backward(
            tensors, gradient, retain_graph, create_graph, inputs=inputs
        )

    # -- optimizers -----------------------------------------------------------------
    def setup_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        return None

    def full_parameters(
        self, optimizer: torch.optim.Optimizer
    ) -> list[torch.Tensor] | None:
        """The full values of ``optimizer``'s parameters as the script built it,
        where its ``param_groups`` now hold something else (an engine's
        partitions); None: read ``param_groups``. A collective where not None."""
        return None

    def clip_grad_norm_(
        self,
        parameters: Iterable[torch.Tensor],
        max_norm: float,
        norm_type: float = 2.0,
    ) -> torch.Tensor:
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)


def strategy_class(name: str) -> type[Strategy]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"strategy {name!r} is not one of: auto, {', '.join(sorted(_REGISTRY))}"
        ) from None


def strategy_names() -> list[str]:
    """The registered strategies' names, sorted. ``--strategy`` reads its choices
    from the runtime configuration instead (``--help`` must not import torch); a
    test keeps the two equal."""
    return sorted(_REGISTRY)


def strategies_reading(setting: str) -> list[str]:
    """The strategies that read ``setting`` (a ``RuntimeConfig`` field) as their
    own (``Strategy.settings``); none for a setting every strategy reads."""
    return sorted(name for name, cls in _REGISTRY.items() if setting in cls.settings)


def optimizers_holding(params: set[nn.Parameter]) -> list[torch.optim.Optimizer]:
    """Every live optimizer holding one of ``params``, prepared by the script or not."""
    found = []
    for obj in gc.get_objects():
        # type(), not isinstance: some objects warn when their __class__ is read.
        if issubclass(type(obj), torch.optim.Optimizer) and any(
            p in params for group in obj.param_groups for p in group["params"]
        ):
            found.append(obj)
    return found
