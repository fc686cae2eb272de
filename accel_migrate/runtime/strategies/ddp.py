"""Data parallel: every rank holds the whole model; gradients are averaged.

Models whose backward uses only some of their outputs
-----------------------------------------------------
A multi-head model (InfoGAN's discriminator: ``validity, _, _ = D(x)`` in one
backward, ``_, label, code = D(x)`` in another) leaves the unused heads without a
gradient. DDP built with ``find_unused_parameters=False`` then never finishes its
reduction: the optimizer step uses gradients that were not averaged, and the next
forward raises "Expected to have finished reduction in the prior iteration".
``find_unused_parameters=True`` from the start would cost a graph traversal at every
forward of every model, which most never need.

So every model starts without it, and the strategy watches: each forward puts a
hook on the outputs that require grad (a few per forward, not one per parameter),
so after a backward it knows which models that backward ran through. A model the
backward ran through whose reducer did not finish is one with unused outputs. That
step is made right on the spot (its gradients are averaged here, every parameter
with a gradient on any rank, as DDP would have), and the model gets a new DDP
wrapper with ``find_unused_parameters=True`` for the rest of the run. A model only
forwarded, whose outputs a later backward uses (DCGAN's generator during the
discriminator's step), is not touched. Every rank decides from its own graph, which
is the same on every rank when the model's use of its outputs does not depend on the
data; one that does (a head used for some batches only) hangs DDP in the original
too, and here fails at the collective timeout.

Several backward passes through one forward
-------------------------------------------
``loss1.backward(retain_graph=True); loss2.backward()`` (an auxiliary loss
backwarded first, a GAN whose two losses share the generator's output): DDP
averages one backward per forward. Where the first backward reaches every
parameter, DDP averages it, and the strategy averages what the later ones add
(the sum of an averaged gradient and a local one, averaged, is exact). Where it
does not (the auxiliary loss reaches the trunk and its head only), no DDP
wrapper can take the step: the one built without find_unused_parameters waits
for the rest, and one built with it finds every parameter used by the forward
and fails when the first backward leaves some without a gradient. So once a
second backward runs through a forward of such a model, its wrapper stops
syncing (``require_backward_grad_sync`` off: its forwards no longer prepare
DDP's reducer) and the strategy averages the model's gradients after every
backward pass itself, one all-reduce of every gradient per backward, for the
rest of the run. Averaging after each backward gives the global batch's
gradients however many backward passes a step runs. Its buffers (BatchNorm
statistics kept per process) are still broadcast from rank 0 where DDP would
broadcast them: before a forward that follows a grad-enabled forward outside
``no_sync``, one coalesced broadcast (before r31d never, and each process kept
its own). Inside ``accel.no_sync`` neither happens, as with DDP: no broadcast
after such a forward, and no averaging of its backward (the next backward
outside averages the accumulated sum, exact). Counted against torch's own DDP in
``tests/runtime/test_manual_collectives.py``.

A backward that does not reach every parameter its forward used
-----------------------------------------------------------------
StyleGAN2's lazy R1 penalty backpropagates ``autograd.grad(D(x).sum(), x,
create_graph=True)``, a gradient with respect to the input, which does not
depend on the critic's last bias. DDP, with or without find_unused_parameters
(which marks only the parameters the *forward* did not use), then waits for that
bias's gradient, and its next forward fails. The first such backward is averaged
here, and the model is averaged by the strategy after every backward from then
on, as above: exact, whatever each backward reaches.

Parameters made trainable after the wrapper was built
-----------------------------------------------------
DDP registers the parameters that require a gradient when it is built (at the
model's first forward). Gradual unfreezing (ULMFiT's ``freeze_to(-1)``, then one
more layer group per phase: ``p.requires_grad = True``) makes others trainable
later; DDP's reducer never sees their gradients, finishes without them, and each
process would step them with its own share's gradient. After a backward that DDP
reduced, such parameters' gradients are averaged here, and the wrapper is built
again over the parameters that are trainable now. The same holds for parameters
added to the prepared model after its first forward (``model.scale =
nn.Parameter(...)``, ``register_parameter``, ``add_module``). A model with no
trainable parameter at its first forward gets no wrapper (DDP refuses one); the
first backward after it has trainable ones averages their gradients and builds
its wrapper.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..comm import broadcast_from_rank0
from ..empty_share import output_tensors
from .base import Strategy
from .ddp_collectives import (
    average_gradients,
    broadcast_own_buffers,
    forget_own_buffers,
    moving_inputs,
    reduced,
)

# Generations of a model's DDP wrapper: built without find_unused_parameters, rebuilt
# with, and no longer syncing (averaged by the strategy after each backward).
_FIRST, _FIND_UNUSED, _MANUAL = 0, 1, 2

#: What DDP says in a backward pass that hands it one parameter's gradient twice.
_READY_TWICE = "Expected to mark a variable ready only once"
_TWICE = (
    "a backward pass handed DDP the gradient of one parameter of a prepared model "
    "twice, and DDP averages each gradient once per backward. Activation "
    "checkpointing with use_reentrant=True of a module that forward runs more than "
    "once (torch.utils.checkpoint.checkpoint(self.block, h, use_reentrant=True) in "
    "a loop over a weight-shared block, ALBERT-style), or of the same parameters in "
    "several checkpointed parts, does this: each recomputation runs a backward of "
    "its own. Fix: use_reentrant=False, whose recomputation is part of the one "
    'backward pass and gives the same gradients (DDP: "Expected to mark a variable '
    'ready only once")'
)


class RepeatedGradientError(RuntimeError):
    """DDP was handed one parameter's gradient twice in one backward pass
    (reentrant activation checkpointing of a module run more than once)."""


class _Watch:
    """Which wrappers' forward outputs the backward passes since the last check used."""

    __slots__ = ("buffers_pending", "forwards", "manual", "reduced_at", "used")

    def __init__(self) -> None:
        self.used: set[int] = set()
        #: Averaged by the strategy after every backward (see the module docstring).
        self.manual = False
        #: Watched forwards so far, and their count at the last reduced backward.
        self.forwards = 0
        self.reduced_at = -1
        #: A forward ran outside no_sync with gradients on since the last
        #: backward: DDP would broadcast the buffers before the next forward.
        self.buffers_pending = False

    def hook(self, generation: int) -> Any:
        used = self.used

        def mark(grad: torch.Tensor) -> None:
            used.add(generation)

        return mark


class DDPStrategy(Strategy):
    name = "ddp"
    late_parameters = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Keyed by the user's module: it outlives a wrapper that is replaced.
        self._watches: weakref.WeakKeyDictionary[nn.Module, _Watch] = (
            weakref.WeakKeyDictionary()
        )
        #: The parameters each wrapper registered (trainable when it was built).
        self._registered: weakref.WeakKeyDictionary[
            DistributedDataParallel, frozenset[int]
        ] = weakref.WeakKeyDictionary()
        #: Models frozen at their first forward, left without a wrapper.
        self._frozen: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        #: Did the last backward keep its graph (``broadcast_own_buffers``)?
        self._retained = False
        #: Models inside ``accel.no_sync`` (how many levels deep), by user module.
        self._unsynced: weakref.WeakKeyDictionary[nn.Module, int] = (
            weakref.WeakKeyDictionary()
        )

    def adopt_late_parameters(self, params: list[nn.Parameter], call: str) -> None:
        # Rank 0's values everywhere, before any forward reads them; every
        # process must run the statement that adds them for the broadcasts to
        # match, checked first without a collective (one written on rank 0
        # only aborted gloo at the broadcast before r33b, naming nothing).
        self.adopt_frozen_parameters(params, call)

    def adopt_frozen_parameters(self, params: list[Any], call: str) -> None:
        super().adopt_frozen_parameters(params, call)
        # a module taken in without a rebuilt wrapper may bring buffers
        forget_own_buffers(None)

    def without_grad(self, forward_module: nn.Module) -> Callable[..., Any]:
        # DDP's forward after a training one broadcasts rank 0's buffers first,
        # even with gradients off: an evaluation that rank 0 alone runs (`if
        # accel.is_main_process(): evaluate(model)`) left the others out of
        # that collective, and gloo aborted at their next one (r32a). The
        # user's module runs it instead: the buffers are the same on every
        # process where BatchNorm normalises by the global batch, and the next
        # training forward broadcasts them. Where its statistics are kept per
        # process, DDP's broadcast is what makes an evaluation use rank 0's:
        # kept (a forward on rank 0 alone then aborts, as under torch's DDP).
        # Other buffers (a running mean of the inputs kept by the model's own
        # forward) are made rank 0's after each backward instead
        # (``broadcast_own_buffers``).
        if isinstance(forward_module, DistributedDataParallel) and self._bypasses():
            return moving_inputs(forward_module)
        return forward_module

    def _bypasses(self) -> bool:
        """Does a forward with gradients off skip DDP's wrapper (``without_grad``)?"""
        config = self.config
        return config.batch_mode != "per-device" and config.sync_batchnorm

    def keep_local_buffers(
        self, forward_module: nn.Module | None, names: list[str]
    ) -> None:
        # DDP reads its module's buffers anew before each broadcast, less those
        # it ignores; a wrapper rebuilt later reads the module's list.
        wrapper = forward_module
        module = (
            wrapper.module if isinstance(wrapper, DistributedDataParallel) else wrapper
        )
        if module is None:
            return
        ignored = list(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        ignored += [n for n in names if n not in ignored]
        module._ddp_params_and_buffers_to_ignore = ignored
        if isinstance(wrapper, DistributedDataParallel):
            wrapper.parameters_to_ignore.update(names)
            forget_own_buffers(wrapper)

    def backward(
        self,
        tensors: torch.Tensor | list[torch.Tensor],
        gradient: Any,
        retain_graph: bool | None,
        create_graph: bool,
        inputs: Any,
    ) -> None:
        # (torch's default: the graph is kept where the backward creates one)
        self._retained = bool(create_graph if retain_graph is None else retain_graph)
        try:
            super().backward(tensors, gradient, retain_graph, create_graph, inputs)
        except RuntimeError as exc:
            if _READY_TWICE not in str(exc):
                raise
            # (not chained: the first error printed is the one that says why)
            raise RepeatedGradientError(_TWICE) from None

    def setup_module(self, module: nn.Module) -> nn.Module:
        if not any(p.requires_grad for p in module.parameters()):
            # A frozen model (a teacher, an EMA copy) has no gradient to average;
            # DDP refuses it. Still start every rank from rank 0's weights.
            # Made trainable later (a backbone frozen for the first phase): see
            # ``_unfrozen``.
            broadcast_from_rank0([*module.parameters(), *module.buffers()], self.device)
            self._frozen.add(module)
            return module
        self._watches[module] = _Watch()
        return self._wrap(module, find_unused_parameters=False)

    def _wrap(
        self,
        module: nn.Module,
        find_unused_parameters: bool,
        init_sync: bool | None = None,
    ) -> DistributedDataParallel:
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        wrapper = DistributedDataParallel(
            module,
            device_ids=device_ids,
            find_unused_parameters=find_unused_parameters,
            # The rebuild skips the broadcast: every rank's parameters are already
            # rank 0's, and writing them in place would break a graph kept for a
            # second backward (retain_graph=True).
            init_sync=(not find_unused_parameters if init_sync is None else init_sync),
        )
        self._registered[wrapper] = frozenset(
            id(p) for p in module.parameters() if p.requires_grad
        )
        return wrapper

    @contextmanager
    def no_sync(self, forward_module: nn.Module | None) -> Iterator[None]:
        if not isinstance(forward_module, DistributedDataParallel):
            yield
            return
        module = forward_module.module
        self._unsynced[module] = self._unsynced.get(module, 0) + 1
        try:
            with forward_module.no_sync():
                yield
        finally:
            self._unsynced[module] -= 1

    # -- unused outputs (see the module docstring) --------------------------------------
    def watch_forward(self, forward_module: nn.Module, output: Any) -> None:
        if not (
            isinstance(forward_module, DistributedDataParallel)
            and torch.is_grad_enabled()
        ):
            return
        watch = self._watches.get(forward_module.module)
        if watch is None:
            return
        if watch.manual:
            generation = _MANUAL
            # DDP broadcasts rank 0's buffers (BatchNorm statistics) before a
            # forward that follows a grad-enabled one outside no_sync; this one
            # cleared the flag (require_backward_grad_sync is off), so each
            # process would keep its own. Set it where DDP would have, no more.
            if not self._unsynced.get(forward_module.module):
                forward_module.require_forward_param_sync = True
        elif not forward_module.require_backward_grad_sync:  # inside no_sync
            return
        else:
            generation = (
                _FIND_UNUSED if forward_module.find_unused_parameters else _FIRST
            )
        watch.forwards += 1
        watch.buffers_pending = not self._unsynced.get(forward_module.module)
        mark = watch.hook(generation)
        for tensor in output_tensors(output):
            if tensor.requires_grad:
                tensor.register_hook(mark)

    def after_backward(self, forward_module: nn.Module) -> nn.Module | None:
        if not isinstance(forward_module, DistributedDataParallel):
            return self._unfrozen(forward_module)
        watch = self._watches.get(forward_module.module)
        if watch is None or not watch.used:
            return None  # this backward did not run through the model
        used = set(watch.used)
        watch.used.clear()  # cleared, not replaced: the hooks hold this set
        if watch.buffers_pending and self._bypasses():
            watch.buffers_pending = False
            broadcast_own_buffers(forward_module, self._retained)
        # A second backward with no forward since the last reduced one (a graph
        # kept with retain_graph=True): DDP expects one backward per forward.
        again = watch.reduced_at == watch.forwards
        watch.reduced_at = watch.forwards
        if watch.manual:
            if not self._unsynced.get(forward_module.module):
                # (inside no_sync DDP exchanges nothing: the gradients accumulate
                # here, and the next backward outside averages their sum)
                average_gradients(forward_module.module, self.device)
            return None
        if not forward_module.find_unused_parameters:
            if again:
                # DDP ignored its hooks: these gradients were not averaged. Those of
                # the backward before were, so averaging the sum is exact.
                average_gradients(forward_module.module, self.device)
                return None
            if reduced(forward_module):
                return self._late_trainable(forward_module)
            # Some parameters got no gradient: DDP is still waiting for them.
            return self._rebuilt(forward_module)
        if used == {_FIRST}:
            # A second backward through a forward run before the rebuild: the old
            # wrapper's hooks are gone, so average it here. The model takes two
            # backward passes per forward, which the rebuilt wrapper cannot.
            average_gradients(forward_module.module, self.device)
            self._average_by_hand(forward_module, watch)
            return None
        if used != {_FIND_UNUSED}:
            raise RuntimeError(
                "accel-migrate: one backward ran through outputs of a model computed "
                "both before and after the runtime rebuilt its DDP wrapper with "
                "find_unused_parameters=True; their gradients cannot be averaged "
                "correctly. Compute the model's outputs again after the first backward"
            )
        if again:
            # DDP ignored this backward's hooks (its reduction of the forward is
            # done): average the sum, exact as above. DDP with
            # find_unused_parameters would record which parameters this backward
            # used for its next reduction, which is then wrong: stop syncing.
            average_gradients(forward_module.module, self.device)
            self._average_by_hand(forward_module, watch)
            return None
        if reduced(forward_module):
            return self._late_trainable(forward_module)
        # The forward used a parameter this backward did not reach (StyleGAN2's
        # lazy R1 penalty: the gradient of the critic's output with respect to
        # its input does not depend on its last bias). find_unused_parameters
        # marks only parameters the forward did not use, so DDP waits for it.
        # No wrapper can take such steps; the strategy averages them itself.
        replacement = self._rebuilt(forward_module)
        self._average_by_hand(replacement, watch)
        return replacement

    def _late_trainable(
        self, forward_module: DistributedDataParallel
    ) -> DistributedDataParallel | None:
        """Parameters that require a gradient now but did not when the wrapper
        was built (gradual unfreezing): DDP reduced without them, so their
        gradients are averaged here, and a wrapper over the parameters trainable
        now replaces this one. None where there are none."""
        registered = self._registered.get(forward_module)
        module = forward_module.module
        if registered is None:
            return None
        late = [
            p
            for p in module.parameters()
            if p.requires_grad and id(p) not in registered
        ]
        if not late:
            return None
        forward_module.reducer._remove_autograd_hooks()
        return self._rewrapped(module, late, forward_module.find_unused_parameters)

    def _unfrozen(self, module: nn.Module) -> DistributedDataParallel | None:
        """A model frozen at its first forward (no wrapper: DDP refuses a model
        without trainable parameters) whose parameters require a gradient now:
        this backward's gradients are averaged here, and a wrapper is built for
        the forwards to come. None while it stays frozen."""
        if module not in self._frozen:
            return None
        trainable = [p for p in module.parameters() if p.requires_grad]
        if not trainable:
            return None
        self._frozen.discard(module)
        self._watches[module] = _Watch()
        return self._rewrapped(module, trainable, find_unused_parameters=False)

    def _rewrapped(
        self,
        module: nn.Module,
        late: list[nn.Parameter],
        find_unused_parameters: bool,
    ) -> DistributedDataParallel:
        """Average this backward's gradients of ``late`` (no wrapper reduced
        them) and wrap ``module`` over what is trainable now. No broadcast: a
        parameter frozen until now was never stepped, and one added late took
        rank 0's value when it was written (``adopt_late_parameters``)."""
        average_gradients(module, self.device, late)
        replacement = self._wrap(module, find_unused_parameters, init_sync=False)
        replacement.train(module.training)
        return replacement

    def _rebuilt(
        self, forward_module: DistributedDataParallel
    ) -> DistributedDataParallel:
        """This backward's gradients averaged here (DDP still waits for some),
        and a new wrapper, with find_unused_parameters, in place of the old one."""
        average_gradients(forward_module.module, self.device)
        forward_module.reducer._remove_autograd_hooks()
        replacement = self._wrap(forward_module.module, find_unused_parameters=True)
        replacement.train(forward_module.training)
        return replacement

    @staticmethod
    def _average_by_hand(
        forward_module: DistributedDataParallel, watch: _Watch
    ) -> None:
        """From now on the wrapper's forwards do not prepare DDP's reducer (its
        hooks then do nothing), and ``after_backward`` averages every backward.
        DDP still broadcasts the buffers before each forward (``watch_forward``)."""
        forward_module.require_backward_grad_sync = False
        forward_module.require_forward_param_sync = True  # the next one, too
        watch.manual = True
