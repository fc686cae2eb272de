"""Parameters, buffers and modules registered late on the *parts* of a prepared model.

``PreparedModule`` checks what the script registers on the prepared model itself
after its first forward (``model.register_buffer(...)``, ``model.add_module``).
A script can also reach past it: ``model.encoder.register_buffer("stats",
x.mean(0))``, ``model.head.norm = nn.BatchNorm1d(8)``, or the same on
``accel.unwrap(model)``. Under DDP and FSDP such a buffer is not one the wrapper
took at the first forward (DDP broadcasts only those), so each process keeps the
value it built (a draw from a random state that has drifted, a statistic of its
own share), where one process has one value: the losses then differ from the
original's with no error (measured on ``tests/runtime/scripts/late_parameters.py``
at world 2: step 3's loss 2.93 against the original's 4.64, under both).

So once a distributed strategy has built a prepared model's wrapper, torch's
global registration hooks (``register_module_buffer_registration_hook``,
``register_module_module_registration_hook``,
``register_module_parameter_registration_hook``) send every buffer, module and
parameter registered on one of its parts to ``PreparedModule._late``, the check
of the prepared model's own registrations: a buffer is refused
(``LateRegistrationError``, at the statement that registers it), a parameter
or a module is taken in where the strategy takes parameters in (DDP: rank 0's
value on every process, its wrapper rebuilt over it, a module's buffers then
broadcast as the others are) and refused otherwise (a module with nothing to
train but buffers, always), and a module's BatchNorm layers are converted as
the prepared ones were. (Before r32a a parameter on a part was not checked:
under DDP each process kept the value it drew, and FSDP refused it only at the
backward, on the processes that got its gradient.)

A registration made inside a module's own forward (``self.register_buffer`` of a
cache grown for a longer input, as rotary-embedding layers do; ``self.bn =
nn.BatchNorm1d(c)`` built at the first forward) is not refused: such a cache
is a function of the input's shape. It runs no collective either, since a
forward may run on some processes only (rank 0's evaluation): a module's
BatchNorm layers are converted (a class swap), and the buffers are kept out of
the strategy's broadcast (``Strategy.keep_local_buffers``; DDP's broadcast
before each forward would otherwise see different lists of buffers on the
processes and abort). One that computes the buffer from the batch keeps each
process's value (a limit); so does a buffer the part had before, replaced in a
forward that only some processes run (and DDP's next broadcast mismatches).
Not refused either: a new value for a buffer the part already has (``module.running_mean =
torch.zeros_like(module.running_mean)``, ``load_state_dict(sd, assign=True)``):
DDP takes the module's buffers anew before each broadcast, as for one assigned on
the prepared model itself. And so is the ``weight_mask`` that
``torch.nn.utils.prune`` registers by magnitude: a function of the weights,
which are the same on every process. A random pruning method's mask
(``prune.random_unstructured``, ``RandomStructured``) is each process's own
draw: refused. A registration traced by ``torch.compile`` is not a call of the
script's and is not checked. A part removed from the model (``del
model.aux``, ``model.aux = None``) is not watched from then on (FSDP2 keeps
its parameters in the groups it built, where they get no gradient: trains as
one process, ``tests/runtime/test_removed_part.py``). A frozen parameter
(``requires_grad=False``) takes rank 0's value under every strategy (before
r33b each process kept its own draw): ``take_rank_0s``, which first checks
that every process runs the statement (``same_statement``).

The hooks are installed at the first distributed prepared model, so one process
runs nothing of this. What a hook costs on every other registration of the
process is a test of whether torch compiles and one dictionary look-up.
"""

from __future__ import annotations

import sys
import time
import weakref
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.modules import module as torch_module

from . import progress, sync_batchnorm, sync_instancenorm
from .comm import broadcast_from_rank0

#: Every part of a prepared model whose wrapper is built, to that prepared model.
_OWNERS: weakref.WeakKeyDictionary[nn.Module, weakref.ref[Any]] = (
    weakref.WeakKeyDictionary()
)
_INSTALLED: list[Any] = []
#: The buffers ``_keep_local`` kept out of the broadcast, by part.
_KEPT: weakref.WeakKeyDictionary[nn.Module, set[str]] = weakref.WeakKeyDictionary()
#: The frames of a module's call: a registration below one is the module's own.
_CALLS = frozenset({"_call_impl", "_wrapped_call_impl"})
_TORCH_MODULE = torch_module.__file__


#: The store's keys of the checks (``same_statement``): one round per statement.
_KEYS = "accel_migrate/late/"
#: Set by a process whose check failed: every later one is refused at once.
_REFUSED = _KEYS + "refused"
#: How long a waiting process waits for the round between looks at where the
#: others are (``progress``), in seconds.
_LOOK = 0.25
#: How often it looks whether the round is decided (seconds).
_POLL = 0.05
_UNEVEN = (
    "`{call}` on a prepared model after its first forward ran on rank(s) {here} "
    "and {why}: a parameter added then "
    "takes rank 0's value on every process, so every process must run the "
    "statement that adds it. Run it on every process "
    "(outside `if rank == 0:`), or add the parameter before the model's first "
    "forward"
)
_TIMED_OUT = (
    "the other ranks had not reached it within {timeout:g} s (the run's timeout)"
)
_WENT_ON = (
    "rank(s) {gone} went on without it (to a collective or an `accel.backward` "
    "that rank(s) {here} reach only after it)"
)
_DIFFERENT = (
    "processes added different parameters to a prepared model after its first "
    "forward ({calls}): each takes rank 0's value on every process, so every "
    "process must run the same statements. Run them on every "
    "process, or add the parameters before the model's first forward"
)
_AFTER_REFUSAL = (
    "`{call}` on a prepared model after its first forward: an earlier statement "
    "that added a parameter late was refused (LateRegistrationError), after "
    "which the processes no longer agree on which statement is which; every "
    "later one is refused. Run such statements on every process, or add the "
    "parameters before the model's first forward"
)


def same_statement(
    call: str,
    rank: int,
    world: int,
    timeout: float,
    counts: list[int] | None = None,
) -> None:
    """Does every process run ``call`` (a statement that adds a parameter to a
    prepared model late) as its next such statement? Asked of the process
    group's store, not with a collective: a process that does not run it is in
    some other collective, which this one would meet and abort at. Raises
    ``LateRegistrationError`` where not, on every process that runs one.

    Each statement is a round of keys: every process writes its call and counts
    itself in; the last to arrive marks the round complete. One that waits marks
    it failed as soon as another process is seen past the statement without it
    (``progress``: its count of collectives or ``accel.backward`` calls beyond
    this one's here, its count of rounds short of this one: it went on, and is
    most likely blocked in that collective), and otherwise after ``timeout``
    seconds (the run's); one ``compare_set`` decides which came first, so the
    processes that run the statement agree. A process that gets there slowly
    (rank 0 evaluating first) never shows such counts: its calls before the
    statement are the same as this one's. A failed round refuses every later
    statement (the processes' counts of rounds differ from then on), on every
    process. The last process to read a complete round deletes its keys, and
    the processes that leave a failed one delete theirs (``_leave_failed``).
    ``counts``: this process's (``progress.COUNTS``; a test gives its own)."""
    from .module import LateRegistrationError

    store = dist.distributed_c10d._get_default_store()
    if store.check([_REFUSED]):
        raise LateRegistrationError(_AFTER_REFUSAL.format(call=call))
    counts = progress.COUNTS if counts is None else counts  # (a test's own)
    here_counts = list(counts)
    number = here_counts[progress.ROUNDS]
    counts[progress.ROUNDS] += 1
    prefix = f"{_KEYS}{number}/"
    keys = [f"{prefix}{r}" for r in range(world)]
    store.set(keys[rank], call)
    state = prefix + "state"
    if store.add(prefix + "arrived", 1) == world:
        outcome = store.compare_set(state, "", "complete")
    else:
        outcome = _wait(store, state, keys, here_counts, timeout)
    if outcome != b"complete":
        _leave_failed(store, prefix, keys, rank)
        here, _, why = outcome.decode().removeprefix("failed").strip().partition("|")
        if not why:  # (another round failed while this one waited)
            raise LateRegistrationError(_AFTER_REFUSAL.format(call=call))
        raise LateRegistrationError(_UNEVEN.format(call=call, here=here, why=why))
    calls = [value.decode() for value in store.multi_get(keys)]
    if store.add(prefix + "read", 1) == world:
        _delete(store, [*keys, state, prefix + "arrived", prefix + "read"])
    if len(set(calls)) > 1:
        store.set(_REFUSED, "1")
        listed = ", ".join(f"rank {r}: `{c}`" for r, c in enumerate(calls))
        raise LateRegistrationError(_DIFFERENT.format(calls=listed))


def _wait(
    store: Any, state: str, keys: list[str], counts: list[int], timeout: float
) -> bytes:
    """The round's outcome: ``complete`` once every process has arrived; else
    ``failed <ranks here>|<why>`` where this process fails it (a process seen
    past the statement without it, or ``timeout`` seconds waited) or another
    did, or ``failed`` where another round failed meanwhile (``_REFUSED``)."""
    deadline = time.monotonic() + timeout
    look = time.monotonic() + _LOOK
    while True:
        # (polled: a ``store.wait`` that times out has c10d print two warnings
        # per look on every waiting process)
        if store.check([state]):
            return store.get(state)
        if time.monotonic() < look:
            time.sleep(_POLL)
            continue
        look = time.monotonic() + _LOOK
        if store.check([_REFUSED]):
            # (this round's outcome where it was the one refused: its state is
            # written before ``_REFUSED``)
            return store.get(state) if store.check([state]) else b"failed"
        gone = _went_on(store, keys, counts)
        if gone or time.monotonic() >= deadline:
            here = ", ".join(str(r) for r, k in enumerate(keys) if store.check([k]))
            why = (
                _WENT_ON.format(gone=", ".join(map(str, gone)), here=here)
                if gone
                else _TIMED_OUT.format(timeout=timeout)
            )
            # fail the round unless it just completed (or another failed it)
            return store.compare_set(state, "", f"failed {here}|{why}")


def _went_on(store: Any, keys: list[str], counts: list[int]) -> list[int]:
    """The ranks that have not arrived in the round and have posted counts past
    ``counts`` (this process's at the statement): they went on without it.
    (Every process's counts read at once; a rank's arrival only where its
    counts are past.)"""
    gone = []
    for other, posted in progress.read_all(store, list(range(len(keys)))).items():
        if posted[progress.ROUNDS] > counts[progress.ROUNDS]:
            continue
        if (
            posted[progress.COLLECTIVES] > counts[progress.COLLECTIVES]
            or posted[progress.BACKWARDS] > counts[progress.BACKWARDS]
        ) and not store.check([keys[other]]):
            gone.append(other)
    return gone


def _leave_failed(store: Any, prefix: str, keys: list[str], rank: int) -> None:
    """Leave a failed round, whose ``outcome`` this process has read (``_wait``):
    every later statement refused (``_REFUSED``), this process's key deleted,
    and the round's other keys by the last of the processes that arrived to
    leave (each has read the outcome by then; one that arrives after they went
    finds ``_REFUSED`` set, and deletes what it wrote as it leaves)."""
    store.set(_REFUSED, "1")
    store.delete_key(keys[rank])
    arrived, left = prefix + "arrived", prefix + "left"
    if store.add(left, 1) >= store.add(arrived, 0):
        _delete(store, [prefix + "state", arrived, left])


def _delete(store: Any, keys: list[str]) -> None:
    """Delete a round's ``keys`` (its last reader or leaver does)."""
    for key in keys:
        store.delete_key(key)


def take_rank_0s(
    params: list[nn.Parameter],
    call: str,
    rank: int,
    world: int,
    timeout: float,
    device: torch.device,
) -> None:
    """Parameters that ``call`` added to a prepared model after its wrapper was
    built: rank 0's values on every process, before any forward reads them
    (each process built its own, from random states that may have drifted).
    Every process must run ``call``: checked first (``same_statement``, which
    waits up to ``timeout`` seconds, the run's, for the others). Sent from
    ``device``, the runtime's (``comm.broadcast_from_rank0``)."""
    same_statement(call, rank, world, timeout)
    broadcast_from_rank0(params, device)


def watch(prepared: Any, module: nn.Module) -> None:
    """From now on, registrations on ``module``'s parts go to ``prepared._late``
    (and this process's counts posted while it is blocked: ``progress``)."""
    if dist.is_initialized():  # (once per store; a unit test may have none)
        progress.start_poster(
            dist.distributed_c10d._get_default_store(), prepared._runtime.env.rank
        )
    if not _INSTALLED:
        _INSTALLED.append(
            torch_module.register_module_buffer_registration_hook(_on_buffer)
        )
        _INSTALLED.append(
            torch_module.register_module_module_registration_hook(_on_module)
        )
        _INSTALLED.append(
            torch_module.register_module_parameter_registration_hook(_on_parameter)
        )
    adopt(prepared, module)


def adopt(prepared: Any, module: nn.Module) -> None:
    """``module`` and its parts are parts of ``prepared`` (built with it, or taken in)."""
    owner = weakref.ref(prepared)
    for part in module.modules():
        try:
            _OWNERS[part] = owner
        except TypeError:  # a module class with __eq__ and no __hash__: not watched
            continue


def _found(module: nn.Module) -> Any:
    """The prepared model ``module`` is part of (None for any other module, and
    for one removed from it since: ``del model.aux``, ``model.aux = None``)."""
    try:
        found = _OWNERS.get(module)
    except TypeError:  # unhashable
        return None
    return None if found is None else found()


def _still_part(prepared: Any, module: nn.Module) -> bool:
    """Is ``module`` still a part of ``prepared``? One removed since (``del
    model.aux``, ``model.aux = None``) is not watched from now on."""
    return _kept_path(prepared, module) is not None


def _kept_path(prepared: Any, module: nn.Module) -> str | None:
    """``_path``; a module no longer a part of ``prepared`` is not watched from
    now on (``_still_part``)."""
    path = _path(prepared, module)
    if path is None:
        _OWNERS.pop(module, None)
    return path


def _owner(module: nn.Module) -> Any:
    """The prepared model ``module`` is part of, where a registration on it is
    checked here (not one ``PreparedModule`` makes, which it checked itself)."""
    prepared = _found(module)
    return None if prepared is None or prepared._registering else prepared


def _in_a_forward() -> bool:
    """Is this registration made inside some module's call (its own forward)?"""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name in _CALLS and code.co_filename == _TORCH_MODULE:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _name(prepared: Any, module: nn.Module) -> str | None:
    """``module``'s name in ``prepared``'s user module ("" for that module
    itself); None where it is no longer one of its parts."""
    for name, part in prepared.original_module.named_modules(remove_duplicate=False):
        if part is module:
            return name
    return None


def _path(prepared: Any, module: nn.Module) -> str | None:
    """How the script reaches ``module`` (``model.encoder[2]``); None where it is
    no longer a part of ``prepared``."""
    name = _name(prepared, module)
    if name is None:
        return None
    # model.encoder.2 is written model.encoder[2]
    steps = (f"[{s}]" if s.isdigit() else f".{s}" for s in name.split("."))
    return "model" + "".join(steps) if name else "accel.unwrap(model)"


def _pruning() -> str:
    """Is this registration made by ``torch.nn.utils.prune`` (its ``*_mask``):
    "magnitude", "random" (a ``Random*`` method's, each process's own draw),
    or "" (not pruning)? (Not imported here: a script that prunes imported it.)"""
    prune = sys.modules.get("torch.nn.utils.prune")
    if prune is None:
        return ""
    found = ""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == prune.__file__:
            found = "magnitude"
            for value in frame.f_locals.values():
                kind = value if isinstance(value, type) else type(value)
                if kind.__name__.startswith("Random"):
                    return "random"
        frame = frame.f_back  # type: ignore[assignment]
    return found


def _on_buffer(module: nn.Module, name: str, tensor: Any) -> None:
    if torch.compiler.is_compiling():  # dynamo traced into the hook: not a call
        return None
    prepared = _owner(module)
    if prepared is None or tensor is None or name in module._buffers:
        # a new value for a buffer the wrapper already has (SWA's reset_bn,
        # load_state_dict(assign=True)): DDP takes the module's buffers anew
        # before each broadcast, so this one is broadcast as before
        return None
    if _in_a_forward():
        _keep_local(prepared, module, [name])
        return None
    if _pruning() == "magnitude" or not _still_part(prepared, module):
        return None
    # (a random pruning method's mask is refused as any late buffer: each
    # process would keep its own draw)
    call = f"{_path(prepared, module)}.register_buffer({name!r}, ...)"
    prepared._late(call, tensor, buffer=True)
    return None


def _keep_local(prepared: Any, module: nn.Module, names: list[str]) -> None:
    """Buffers a forward registered (new names) on ``module``, a part of
    ``prepared``: kept out of the strategy's broadcast of buffers (DDP's before
    each forward). A forward that only some processes run (rank 0's evaluation)
    would otherwise leave the processes with different lists of buffers, and
    DDP's next broadcast would mismatch; such a buffer is a cache of the input's
    shape, the same wherever it is built."""
    kept = _KEPT.setdefault(module, set())
    names = [n for n in names if n not in kept]
    prefix = _name(prepared, module) if names else None
    if prefix is None:
        return
    kept.update(names)
    full = [f"{prefix}.{n}" if prefix else n for n in names]
    prepared._runtime.strategy.keep_local_buffers(prepared.forward_module, full)


def _on_parameter(module: nn.Module, name: str, param: Any) -> None:
    """``model.encoder.scale = nn.Parameter(...)``, ``model.head.register_parameter``
    (or the same on ``accel.unwrap(model)``): checked as one written on the
    prepared model (DDP takes it in as rank 0's value, the other strategies
    refuse it at the statement). One a module registers in its own forward, and
    a new value for one the part has, are left to the strategy's check at the
    backward (DDP takes the latter in as rank 0's value), and the ``*_orig`` that
    ``torch.nn.utils.prune`` registers is the weight the part held already."""
    if torch.compiler.is_compiling():
        return None
    prepared = _owner(module)
    if prepared is None or param is None or module._parameters.get(name) is param:
        return None
    if _in_a_forward() or _pruning():
        return None
    if name in module._parameters and not prepared._runtime.strategy.late_parameters:
        # a new value for one it has (load_state_dict(assign=True)): left to
        # the strategy's check at the backward, as before
        return None
    path = _kept_path(prepared, module)
    if path is None:  # removed from the model: not watched
        return None
    written = sys._getframe(2).f_code.co_name == "__setattr__"
    call = (
        f"{path}.{name} = nn.Parameter(...)"
        if written
        else f"{path}.register_parameter({name!r}, ...)"
    )
    prepared._late(call, param)
    return None


def _on_module(parent: nn.Module, name: str, submodule: Any) -> None:
    if torch.compiler.is_compiling():
        return None
    prepared = _found(parent)
    if prepared is None or submodule is None:
        return None
    if parent._modules.get(name) is submodule:
        return None  # `self.block = self.block`: nothing new
    if prepared._registering:
        pass  # PreparedModule checked it
    elif _in_a_forward():
        if not _still_part(prepared, parent):
            return None
        # A layer built in a forward (`if self.bn is None: self.bn =
        # nn.BatchNorm1d(c)`): its BatchNorm layers normalise by the global
        # batch as the prepared ones do (a class swap, no collective: a forward
        # may run on one process only), and its buffers are kept out of the
        # strategy's broadcast (see ``_keep_local``).
        _convert_norms(submodule, prepared._runtime)
        _keep_local(
            prepared,
            parent,
            [f"{name}.{b}" for b, _ in submodule.named_buffers()],
        )
    else:
        path = _kept_path(prepared, parent)
        if path is None:
            return None
        prepared._late(f"{path}.{name} = ...", submodule)
    adopt(prepared, submodule)
    return None


def _convert_norms(module: nn.Module, runtime: Any) -> None:
    sync_batchnorm.prepare(module, runtime)
    sync_instancenorm.prepare(module, runtime)
