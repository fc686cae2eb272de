"""Buffers and modules registered late on the *parts* of a prepared model.

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
``register_module_module_registration_hook``) send every buffer and module
registered on one of its parts to ``PreparedModule._late``, the check of the
prepared model's own registrations: a buffer is refused
(``LateRegistrationError``, at the statement that registers it), a module that
brings buffers is refused unless the strategy takes its parameters in and
rebuilds its wrapper over it (DDP: its buffers are then broadcast as the others
are), and a module's BatchNorm layers are converted as the prepared ones were.

A registration made inside a module's own forward (``self.register_buffer`` of a
cache grown for a longer input, as rotary-embedding layers do) is left alone:
every process runs that forward, and such a cache is a function of the input's
shape. One that computes the buffer from the batch is not caught (a limit).
So is a new value for a buffer the part already has (``module.running_mean =
torch.zeros_like(module.running_mean)``, ``load_state_dict(sd, assign=True)``):
DDP takes the module's buffers anew before each broadcast, as for one assigned on
the prepared model itself. And so is the ``weight_mask`` that
``torch.nn.utils.prune`` registers by magnitude: a function of the weights,
which are the same on every process. A random pruning method's mask
(``prune.random_unstructured``, ``RandomStructured``) is each process's own
draw: refused. A registration traced by ``torch.compile`` is not a call of the
script's and is not checked.

The hooks are installed at the first distributed prepared model, so one process
runs nothing of this. What a hook costs on every other registration of the
process is a test of whether torch compiles and one dictionary look-up.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as torch_module

#: Every part of a prepared model whose wrapper is built, to that prepared model.
_OWNERS: weakref.WeakKeyDictionary[nn.Module, weakref.ref[Any]] = (
    weakref.WeakKeyDictionary()
)
_INSTALLED: list[Any] = []
#: The frames of a module's call: a registration below one is the module's own.
_CALLS = frozenset({"_call_impl", "_wrapped_call_impl"})
_TORCH_MODULE = torch_module.__file__


def watch(prepared: Any, module: nn.Module) -> None:
    """From now on, registrations on ``module``'s parts go to ``prepared._late``."""
    if not _INSTALLED:
        _INSTALLED.append(
            torch_module.register_module_buffer_registration_hook(_on_buffer)
        )
        _INSTALLED.append(
            torch_module.register_module_module_registration_hook(_on_module)
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
    """The prepared model ``module`` is part of (None for any other module)."""
    try:
        found = _OWNERS.get(module)
    except TypeError:  # unhashable
        return None
    return None if found is None else found()


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


def _path(prepared: Any, module: nn.Module) -> str:
    for name, part in prepared.original_module.named_modules():
        if part is module:
            # model.encoder.2 is written model.encoder[2]
            steps = (f"[{s}]" if s.isdigit() else f".{s}" for s in name.split("."))
            return "model" + "".join(steps) if name else "accel.unwrap(model)"
    return type(module).__name__


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
    if _in_a_forward() or _pruning() == "magnitude":
        return None
    # (a random pruning method's mask is refused as any late buffer: each
    # process would keep its own draw)
    call = f"{_path(prepared, module)}.register_buffer({name!r}, ...)"
    prepared._late(call, tensor, buffer=True)
    return None


def _on_module(parent: nn.Module, name: str, submodule: Any) -> None:
    if torch.compiler.is_compiling():
        return None
    prepared = _found(parent)
    if prepared is None or submodule is None:
        return None
    if not prepared._registering and not _in_a_forward():
        prepared._late(f"{_path(prepared, parent)}.{name} = ...", submodule)
    adopt(prepared, submodule)
    return None
