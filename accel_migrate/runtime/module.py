"""The prepared model: the user's module, run through the strategy.

The strategy's wrapper (``DistributedDataParallel``, a sharded module...) is built at
the first forward call, not in ``prepare_model``. Real scripts keep changing the model
after they build it (replace a head, freeze layers, load weights); building the
wrapper late means it sees the model the script actually trains. Until then and
afterwards, attribute reads and writes reach the user's module, and state dicts keep
the user's keys (no ``module.`` prefix).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from . import empty_share, late_registration, sync_batchnorm, sync_instancenorm

if TYPE_CHECKING:
    from ._state import Runtime


class UnreachedParametersError(RuntimeError):
    """A backward reached only some of a prepared model's parameters, and DDP
    still waits for the others' gradients at the next forward."""


#: What DDP says at the next forward when the last backward left it waiting.
_UNFINISHED_REDUCTION = "Expected to have finished reduction in the prior iteration"
_UNREACHED = (
    "the previous backward through this prepared model did not reach all of its "
    "parameters, and under DDP every process waits for their gradients. A loss "
    "built only from a gradient of the model's output "
    "(torch.autograd.grad(..., create_graph=True): StyleGAN2's lazy R1 or path "
    "length penalty), or one that leaves some outputs unused, can do this (the "
    "runtime averages such steps itself where it sees them). Add the "
    "model's output with a zero weight to that loss (`loss + 0 * out.sum()`, as "
    "the distributed StyleGAN2 code does), so that every parameter gets a "
    'gradient at each backward (DDP: "Expected to have finished reduction in the '
    'prior iteration")'
)


class EmptyShareForwardError(RuntimeError):
    """The model's forward failed on this process's empty share of a short global
    batch (one with fewer samples than there are processes), which the original
    script never hands it."""


def _empty_share_message(exc: BaseException) -> str:
    return (
        "the model's forward failed on this process's share of a short global "
        "batch, which is empty: the last batch of a loader has fewer samples than "
        "there are processes, so this process gets zero rows, which the original "
        "script never hands the model. The forward cannot take a batch of zero "
        "rows (a reshape with -1, `x.view(x.size(0), 1, -1)`, a BatchNorm, a loop "
        "over the rows...). Make it accept one (name every dimension but the "
        "first: `x.view(x.size(0), 1, n)`), or give the loader drop_last=True or a "
        "dataset size whose last batch fills every process "
        f"({type(exc).__name__}: {exc})"
    )


def _empty_input(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    """Is the first tensor the forward is handed (a batch) empty along its first
    dimension?"""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.dim() > 0 and value.shape[0] == 0
    return False


# Attributes that belong to the wrapper itself; every other write goes to the user's module.
_OWN_ATTRIBUTES = frozenset(
    {"training", "_forward_module", "_runtime", "_forward_calls", "_registering"}
)


class LateRegistrationError(RuntimeError):
    """A parameter, buffer or submodule registered on a prepared model after its
    first forward, when the strategy's wrapper has been built without it."""


_LATE = (
    "`{call}` on a prepared model after its first forward under --strategy "
    "{strategy}: the strategy's wrapper ({wrapper}) was built at that forward, "
    "without it, so {consequence}. {fix}"
)
_LATE_PARAMETER = (
    "its gradient would not be averaged across the processes",
    "Add it before the model's first forward (where the model is built, before or "
    "right after accel.prepare_model(...)), or use --strategy ddp, which trains "
    "parameters added later",
)
_LATE_BUFFER = (
    "each process would keep the value it built: the buffers the wrapper took at "
    "that forward were made rank 0's on every process, this one would not be (a "
    "value drawn from a random state that has drifted, or computed from each "
    "process's share of the data, differs between processes)",
    "Register it before the model's first forward (where the model is built, before "
    "or right after accel.prepare_model(...))",
)
_WRAPPERS = {"ddp": "DistributedDataParallel", "deepspeed": "DeepSpeed's engine"}


def _new_parameters(value: Any, module: nn.Module) -> list[nn.Parameter]:
    """The parameters ``value`` brings ``module`` that it does not hold yet."""
    params = (
        [value]
        if isinstance(value, nn.Parameter)
        else list(value.parameters()) if isinstance(value, nn.Module) else []
    )
    held = {id(p) for p in module.parameters()}
    return [p for p in params if id(p) not in held]


def _new_buffers(value: Any, module: nn.Module) -> bool:
    """Does the module ``value`` bring ``module`` a buffer it does not hold yet?"""
    if not isinstance(value, nn.Module):
        return False
    held = {id(b) for b in module.buffers()}
    return any(id(b) not in held for b in value.buffers())


class PreparedModule(nn.Module):
    """The user's module behind the strategy's forward wrapper."""

    def __init__(self, module: nn.Module, runtime: Runtime) -> None:
        super().__init__()
        self._original_module = module
        object.__setattr__(self, "_runtime", runtime)
        object.__setattr__(self, "_forward_module", None)
        object.__setattr__(self, "_forward_calls", 0)
        object.__setattr__(self, "_registering", False)

    # -- forward ----------------------------------------------------------------------
    def ensure_ready(self) -> nn.Module:
        """Build the strategy's wrapper now, if the first forward has not."""
        forward_module = self._forward_module
        if forward_module is None:
            # BatchNorm of the global batch: done here, not in prepare_model, so
            # that layers the script adds or replaces after preparing are seen.
            sync_batchnorm.prepare(self._original_module, self._runtime)
            sync_instancenorm.prepare(self._original_module, self._runtime)
            forward_module = self._runtime.strategy.setup_module(self._original_module)
            object.__setattr__(self, "_forward_module", forward_module)
            if self._runtime.strategy.distributed:
                # Buffers and modules registered on its parts from now on
                # (``model.encoder.register_buffer``) are checked as those
                # registered on the prepared model are (``_late``).
                late_registration.watch(self, self._original_module)
            self._runtime.on_module_ready(self)
        return forward_module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        forward_module = self.ensure_ready()
        object.__setattr__(self, "_forward_calls", self._forward_calls + 1)
        run = forward_module
        if not torch.is_grad_enabled():
            # an evaluation, which may run on one process only
            run = self._runtime.strategy.without_grad(forward_module)
        with self._runtime.precision.forward_context():
            try:
                output = run(*args, **kwargs)
            except (RuntimeError, ValueError, IndexError) as exc:
                if isinstance(exc, RuntimeError) and _UNFINISHED_REDUCTION in str(exc):
                    # (not chained: the first error printed is the one that says why)
                    raise UnreachedParametersError(_UNREACHED) from None
                if self._runtime.env.distributed and _empty_input(args, kwargs):
                    raise EmptyShareForwardError(_empty_share_message(exc)) from None
                raise
        self._runtime.strategy.watch_forward(forward_module, output)
        if self._runtime.env.distributed:
            empty_share.gate_outputs(output, self._runtime)
        return output

    @property
    def forward_module(self) -> nn.Module | None:
        """The strategy's wrapper, once the first forward has built it."""
        return self._forward_module

    def replace_forward_module(self, forward_module: nn.Module) -> None:
        """Use a new wrapper of the same module from now on (see ``Runtime.after_backward``)."""
        object.__setattr__(self, "_forward_module", forward_module)

    def release_forward_module(self) -> None:
        """Drop the strategy's wrapper (at shutdown, before the process group goes)."""
        object.__setattr__(self, "_forward_module", None)

    @property
    def original_module(self) -> nn.Module:
        return self._modules["_original_module"]  # type: ignore[return-value]

    # -- attribute access ------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            pass
        original = self._modules["_original_module"]
        if name == "module" and not hasattr(original, "module"):
            # Code written for nn.DataParallel reads `model.module`.
            return original
        return getattr(original, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN_ATTRIBUTES or name.startswith("_"):
            super().__setattr__(name, value)
        else:
            # `model.scale = nn.Parameter(...)` is `register_parameter` spelt otherwise.
            self._late(f"model.{name} = ...", value)
            self._on_original(setattr, self._modules["_original_module"], name, value)

    def __delattr__(self, name: str) -> None:
        if name in _OWN_ATTRIBUTES or name.startswith("_"):
            super().__delattr__(name)
        else:
            # `del model.aux`: the part leaves the user's module (and is no
            # longer watched: late_registration)
            delattr(self._modules["_original_module"], name)

    # -- registration reaches the user's module, like attribute writes ----------------
    def register_parameter(self, name: str, param: nn.Parameter | None) -> None:
        """``model.register_parameter("lambda_1", p)`` after preparing (the PINN
        ports' learnt PDE coefficients): the user's module holds it, so that
        ``parameters()``, the optimizer and the strategy's wrapper see it."""
        self._late("register_parameter", param)
        self._on_original(self.original_module.register_parameter, name, param)

    def register_buffer(
        self, name: str, tensor: torch.Tensor | None, persistent: bool = True
    ) -> None:
        self._late("register_buffer", tensor, buffer=True)
        self._on_original(
            self.original_module.register_buffer, name, tensor, persistent
        )

    def add_module(self, name: str, module: nn.Module | None) -> None:
        if name == "_original_module":
            super().add_module(name, module)  # nn.Module.__setattr__ of __init__
            return
        self._late("add_module", module)
        self._on_original(self.original_module.add_module, name, module)

    def register_module(self, name: str, module: nn.Module | None) -> None:
        self.add_module(name, module)

    def _on_original(self, register: Any, *args: Any) -> None:
        """A registration on the user's module that ``_late`` has checked (the
        global hooks of ``late_registration`` then do not check it again)."""
        object.__setattr__(self, "_registering", True)
        try:
            register(*args)
        finally:
            object.__setattr__(self, "_registering", False)

    def _late(self, call: str, value: Any, buffer: bool = False) -> None:
        """Refuse what the strategy's wrapper, built at the first forward, would
        not train as one process does: a trainable parameter added later where
        the strategy cannot take it in (DDP can: its ``_late_trainable``), any
        buffer registered later, a module that brings buffers unless the
        strategy takes its parameters in (DDP's rebuilt wrapper then broadcasts
        its buffers as the others'). A module's BatchNorm layers are made the
        global batch's, as the prepared ones were. One process runs the script
        as written. Also called for registrations on the model's parts
        (``late_registration``)."""
        strategy = self._runtime.strategy
        if self._forward_module is None or not strategy.distributed:
            return
        new = _new_parameters(value, self.original_module)
        trainable = any(p.requires_grad for p in new)
        if buffer:
            if value is None:
                return
            consequence, fix = _LATE_BUFFER
        elif trainable and not strategy.late_parameters:
            consequence, fix = _LATE_PARAMETER
        elif not trainable and _new_buffers(value, self.original_module):
            consequence, fix = _LATE_BUFFER  # nothing to train but buffers
        elif not trainable:
            if new:
                # frozen (requires_grad=False): no strategy trains or shards
                # it; rank 0's value everywhere (before r33b each process
                # kept its own draw)
                strategy.adopt_frozen_parameters(new, call)
            return
        else:
            if isinstance(value, nn.Module):
                sync_batchnorm.prepare(value, self._runtime)
                sync_instancenorm.prepare(value, self._runtime)
            # Every process writes it (the same statement), each from its own
            # random state: rank 0's value, as a parameter built before the
            # wrapper gets from the wrapper's first broadcast.
            strategy.adopt_late_parameters(new, call)
            return
        raise LateRegistrationError(
            _LATE.format(
                call=call,
                strategy=strategy.name,
                wrapper=_WRAPPERS.get(strategy.name, "a sharded module"),
                consequence=consequence,
                fix=fix,
            )
        )

    def __reduce_ex__(self, protocol: Any) -> Any:
        # `torch.save(model, path)` and `copy.deepcopy(model)` see the user's module:
        # the pickle rebuilds it with operator.getitem, so loading it needs nothing of
        # accel-migrate, only the user's class.
        return (operator.getitem, ([self.original_module], 0))

    def __repr__(self) -> str:
        return (
            f"PreparedModule({self._runtime.strategy.name}, {self.original_module!r})"
        )

    # -- names and state keep the user's keys -------------------------------------------
    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, nn.Parameter]]:
        return self.original_module.named_parameters(prefix, recurse, remove_duplicate)

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, torch.Tensor]]:
        return self.original_module.named_buffers(prefix, recurse, remove_duplicate)

    def named_modules(
        self,
        memo: set[nn.Module] | None = None,
        prefix: str = "",
        remove_duplicate: bool = True,
    ) -> Iterator[tuple[str, nn.Module]]:
        return self.original_module.named_modules(memo, prefix, remove_duplicate)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            # Called by a parent module collecting its children's state.
            return self.original_module.state_dict(*args, **kwargs)
        return self._runtime.strategy.module_state_dict(self.original_module)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        return self._runtime.strategy.load_module_state_dict(
            self.original_module, state_dict, strict=strict
        )

    def train(self, mode: bool = True) -> PreparedModule:
        super().__setattr__("training", mode)
        forward_module = self._forward_module
        (self.original_module if forward_module is None else forward_module).train(mode)
        return self


class PreparedContainer(PreparedModule):
    """A prepared container module (``nn.Sequential``, ``nn.ModuleList``,
    ``nn.ModuleDict``, a user module with ``__getitem__``): its parts are read
    as on the user's module (``model[0].requires_grad_(False)``, ``for layer in
    model``). Only such a module gets these: on any other, a ``__len__`` would
    change what ``bool(model)`` means.

    A part called in place of the model runs outside the strategy's forward, and
    its gradients are not averaged; when the model's own forward has not run by
    the first backward, ``Runtime.check_first_backward`` refuses that loudly.
    """

    def __getitem__(self, key: Any) -> Any:
        return self.original_module[key]  # type: ignore[index]

    def __setitem__(self, key: Any, value: Any) -> None:
        # `model[3] = nn.Linear(...)`: checked as `model.name = ...` is
        self._late(f"model[{key!r}] = ...", value)
        self._on_original(operator.setitem, self.original_module, key, value)

    def __delitem__(self, key: Any) -> None:
        del self.original_module[key]  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.original_module)  # type: ignore[call-overload]

    def __len__(self) -> int:
        return len(self.original_module)  # type: ignore[arg-type]


def prepared_class(module: nn.Module) -> type[PreparedModule]:
    """The wrapper class for ``module``: a container's hands out its parts."""
    kind = type(module)
    if callable(getattr(kind, "__getitem__", None)) and callable(
        getattr(kind, "__len__", None)
    ):
        return PreparedContainer
    return PreparedModule
