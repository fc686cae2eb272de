"""Objects that only the main process should have: loggers and files it writes.

``accel.on_main_process(factory, *args, **kwargs)`` calls ``factory(*args,
**kwargs)`` on the main process and returns what it returns. On the other
processes it calls nothing and returns a stand-in that accepts anything: every
method call, attribute read or write, ``with`` block, iteration (empty) and
comparison, and does nothing. So a script can keep writing to the object on
every process, as the original script did, while only the main process creates
the file, the TensorBoard event file or the wandb run.

The arguments are evaluated on every process (Python evaluates them before the
call), and so are the arguments of every later call on the stand-in: a
collective inside them (``writer.add_scalar("loss", accel.global_loss(loss))``)
is still reached by every process.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .api import is_main_process

T = TypeVar("T")


class MainProcessOnly:
    """What a process other than the main one gets instead of a logger or a file:
    it accepts anything and does nothing."""

    __slots__ = ("_name",)

    def __init__(self, name: str = "object") -> None:
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name: str) -> MainProcessOnly:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # copy, pickle and friends: no such protocol
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        pass

    def __delattr__(self, name: str) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> MainProcessOnly:
        return self

    def __enter__(self) -> MainProcessOnly:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __getitem__(self, key: Any) -> MainProcessOnly:
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def fileno(self) -> int:
        """The descriptor of an unnamed temporary file: a log file's ``flush``
        often ends in ``os.fsync(self.file.fileno())`` (deep-person-reid's
        Logger), which needs a real descriptor of a file that can be synced
        (``os.devnull`` cannot). Writes through the stand-in itself are dropped."""
        return _scratch_fd()

    def __bool__(self) -> bool:
        # The real object (a writer, a file, a run) is true: code under
        # `if writer:` runs on every process, so collectives in it stay matched.
        return True

    def __repr__(self) -> str:
        return f"<{self._name} on the main process only>"


_SCRATCH: list[Any] = []


def _scratch_fd() -> int:
    """One unnamed temporary file per process, opened on first use (it is gone
    from the disk when the process ends), emptied at each use: code that writes
    through the descriptor itself (``os.write``, ``subprocess.run(...,
    stdout=f)``) must not fill the disk of a long run on the other processes."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.TemporaryFile())
    descriptor = int(_SCRATCH[0].fileno())
    os.ftruncate(descriptor, 0)
    return descriptor


def on_main_process(factory: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``factory(*args, **kwargs)`` on the main process; elsewhere a stand-in that
    accepts every call and does nothing (see ``MainProcessOnly``)."""
    if is_main_process():
        return factory(*args, **kwargs)
    name = getattr(factory, "__qualname__", None) or type(factory).__name__
    return MainProcessOnly(name)  # type: ignore[return-value]
