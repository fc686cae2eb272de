"""``accel.save`` and ``accel.load``: ``torch.save`` on the main process only,
written atomically, and ``torch.load`` onto this process's device (split from
``api``, which exports them)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch

from ._state import current_env as _env
from ._state import get_runtime, peek_runtime
from .module import PreparedModule


def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
    """``torch.save`` to a path on the main process only, written atomically.

    A file object (an ``io.BytesIO``) belongs to its process: every process writes
    its own, as the original script did.
    """
    if (
        isinstance(obj, PreparedModule)
        and obj.forward_module is not None
        and get_runtime().strategy.shards_parameters
    ):
        # Every rank raises, so none waits for the others in a later collective.
        raise RuntimeError(
            "accel.save(model, ...) of a whole model is not supported under FSDP or "
            "ZeRO stage 3: its "
            "parameters are split across processes. Save accel.state_dict(model) and "
            "load it into a new model instead"
        )
    if not isinstance(f, (str, os.PathLike)):
        torch.save(obj, f, *args, **kwargs)
        return
    if not _env().is_main:
        return
    path = os.fspath(f)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        handle, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=folder)
    except OSError:
        # (a missing folder...) torch.save's own error: a user's ``except`` around
        # it must catch the same thing (torch raises RuntimeError where Python's
        # FileNotFoundError would come from here); where it writes after all,
        # the file is written as the original wrote it
        torch.save(obj, f, *args, **kwargs)
        return
    try:
        with os.fdopen(handle, "wb") as stream:
            torch.save(obj, stream, *args, **kwargs)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if not (
            isinstance(exc, OSError)
            and exc.filename2 == path
            and (os.path.isdir(path) or not os.path.isdir(folder))
        ):
            # (any other failure: a second write in place could leave half a
            # file where the original had one)
            raise
        # os.replace failed as the target is a folder, or the folder went
        # away: torch.save's own error, as above
        torch.save(obj, f, *args, **kwargs)


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``torch.load`` where every process reads GPU tensors onto its own device.

    A checkpoint keeps the device its tensors were saved from (usually GPU 0):
    with a plain ``torch.load`` every process would put them there. Without a
    ``map_location``, tensors saved on a GPU come back on this process's device
    (the CPU where it has no GPU) and CPU tensors stay on the CPU (RNG states
    must). A ``map_location`` given is used as it is.
    """
    if map_location is None:
        map_location = _own_device_location
    return torch.load(f, map_location, *args, **kwargs)


def _own_device_location(storage: Any, location: str) -> Any:
    """``torch.load``'s map_location callable: a GPU storage to this process's
    device; anything else where torch would put it (None)."""
    if not location.startswith("cuda"):
        return None
    runtime = peek_runtime()
    if runtime is not None:
        target = runtime.device
    elif torch.cuda.is_available():
        # No runtime yet: never start one here (it is a rendezvous, and only
        # some processes may load).
        target = torch.device("cuda", _env().local_rank % torch.cuda.device_count())
    else:
        target = torch.device("cpu")
    return storage if target.type == "cpu" else storage.cuda(target.index)
