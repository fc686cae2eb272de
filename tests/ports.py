"""A TCP port for a test's rendezvous that no other test on this machine takes.

Binding port 0, reading the port and closing the socket (what the two-node tests
did) leaves the port free for anyone until the launcher binds it again: another
test doing the same under ``pytest -n 2``, or any outgoing connection (torchrun's
workers open dozens to their store), can be handed it first, and the job then
fails to start or joins the wrong store. ``reserved_port()`` hands out a port
below the kernel's ephemeral range (``ip_local_port_range``), which neither a
bind of port 0 nor a connection is given, and holds an exclusive lock on a file
named after it for as long as the test runs, so that two tests of this machine
(of one session or of several) never take the same one. Where the launcher can
choose its own port (``--standalone``, a world of one: ``MASTER_PORT=0``), no
port is needed.
"""

from __future__ import annotations

import fcntl
import random
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_LOCKS = Path(tempfile.gettempdir()) / "accel-migrate-test-ports"
#: Where ip_local_port_range cannot be read: Linux's default.
_EPHEMERAL = (32768, 60999)


def _ephemeral() -> tuple[int, int]:
    try:
        low, high = (
            int(v)
            for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        )
    except (OSError, ValueError):
        return _EPHEMERAL
    return low, high


def _ephemeral_text() -> str:
    low, high = _ephemeral()
    return f"{low}-{high}"


def _candidates() -> range:
    """Ports that no bind of port 0 or outgoing connection is given here."""
    low, high = _ephemeral()
    return range(20000, low) if low > 21000 else range(high + 1, 65536)


@contextmanager
def reserved_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port free on ``host`` now, that no other ``reserved_port`` hands out
    until this context ends."""
    _LOCKS.mkdir(exist_ok=True)
    ports = _candidates()
    if not ports:  # (randrange(0) says only "empty range in randrange(0, 0)")
        raise RuntimeError(
            "no port to reserve for a test's rendezvous: the kernel's ephemeral "
            f"range ({_ephemeral_text()}, /proc/sys/net/ipv4/ip_local_port_range) "
            "leaves none free below 20000 or above it; narrow that range"
        )
    first = random.randrange(len(ports))
    for index in range(len(ports)):
        port = ports[(first + index) % len(ports)]
        lock = open(_LOCKS / str(port), "a")  # held while the port is in use
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as sock:  # something else listening there?
                sock.bind((host, port))
        except OSError:
            lock.close()
            continue
        try:
            yield port
        finally:
            lock.close()
        return
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")
