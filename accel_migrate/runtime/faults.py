"""Failing well: errors that name the rank and the operation, and one traceback.

When one process of a job raises, the others soon fail too, in whatever collective
they were waiting in ("Connection closed by peer"). Those secondary failures are
reported in one line each, so the traceback of the process that failed first is
the one the user reads. A collective that one rank never reaches fails after the
configured timeout with a message saying which rank waited in which operation.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

_PEER_GONE = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote worker crashing",
    "Broken pipe",
    "NCCL communicator was aborted",
    "ProcessGroupNCCL is aborted",
)
_TIMED_OUT = ("Timed out", "timed out", "Timeout", "timeout")


class CollectiveError(RuntimeError):
    """A collective that could not complete, with the rank and operation named."""


class PeerFailedError(CollectiveError):
    """Another process of the job went away while this one waited for it."""


class CollectiveTimeoutError(CollectiveError):
    """This process waited longer than the timeout for the others."""


def peer_gone(error: BaseException) -> bool:
    return isinstance(error, PeerFailedError) or any(
        s in str(error) for s in _PEER_GONE
    )


@contextmanager
def named_collective(rank: int, operation: str, timeout: float) -> Iterator[None]:
    """Turn a backend's failure inside ``operation`` into a message a user can act on."""
    try:
        yield
    except CollectiveError:
        raise
    except RuntimeError as error:
        first_line = (
            str(error).strip().splitlines()[0]
            if str(error).strip()
            else type(error).__name__
        )
        if peer_gone(error):
            raise PeerFailedError(
                f"rank {rank}: {operation} could not complete: another process of the job "
                f"closed its connection (it failed, or finished without reaching this collective)"
            ) from error
        if any(s in str(error) for s in _TIMED_OUT):
            # `from None`: the backend's own traceback adds nothing to this one.
            raise CollectiveTimeoutError(
                f"rank {rank}: {operation} did not complete within {timeout:g} s: another "
                f"process never reached it (a branch only some ranks take?) [{first_line}]"
            ) from None
        raise


_FAILED = False
RECORDED_AT = "accel_migrate_time"
STOPPED_BY_PEER = "accel_migrate_stopped_by_peer"


def process_failed() -> bool:
    """Whether this process is exiting because of an uncaught exception."""
    return _FAILED


def mark_failed() -> None:
    """This process is failing (a peer went away at exit): it leaves without the
    closing barrier and does not tell the launcher that its work is done."""
    global _FAILED
    _FAILED = True


def install_excepthook(rank: int) -> None:
    """Secondary failures in one line; the first failure recorded for torchrun."""
    previous = sys.excepthook

    def hook(
        kind: type[BaseException], error: BaseException, tb: TracebackType | None
    ) -> None:
        global _FAILED
        _FAILED = True
        if peer_gone(error):
            report_stopped(rank, error)
            return
        record_error(error)
        previous(kind, error, tb)

    sys.excepthook = hook


def report_stopped(rank: int, error: BaseException) -> None:
    """One line for a process stopped because a peer went away (the peer's own
    traceback is the one to read), and the record that says so for the launcher."""
    if isinstance(error, PeerFailedError):
        lines = str(error).strip().splitlines() or [type(error).__name__]
        message = lines[0].removeprefix(f"rank {rank}: ")
    else:  # the backend's own words (gloo's source path, "GLHF!") help nobody
        message = (
            "a collective could not complete: another process of the job closed "
            "its connection (it failed, or finished without reaching this collective)"
        )
    sys.stderr.write(f"[rank{rank}]: stopped: {message}\n")
    sys.stderr.flush()
    record_error(error, stopped=True)


def record_error(error: BaseException, stopped: bool = False) -> None:
    """Write the error file torchrun reads to name the root cause of a failed job.

    A process ``stopped`` because another one went away says so: the launcher then
    names the other one, even when it died without a word (a signal, ``os._exit``).
    """
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path or os.path.exists(path):
        return
    message = {
        "message": {
            "message": f"{type(error).__name__}: {error}",
            "extraInfo": {
                "py_callstack": "".join(traceback.format_exception(error)),
                "timestamp": str(int(time.time())),
                # torchrun's timestamp has whole seconds; the launcher orders two
                # recorded failures of the same second by this one.
                RECORDED_AT: repr(time.time()),
                STOPPED_BY_PEER: stopped,
            },
        }
    }
    try:
        with open(path, "w") as handle:
            json.dump(message, handle)
    except OSError:
        pass
