"""``tests/ports.py``: a reserved port, and a clear error where none can be."""

from __future__ import annotations

import socket

import pytest

from tests import ports


def test_a_reserved_port_is_below_the_ephemeral_range_and_free() -> None:
    low, high = ports._ephemeral()
    with ports.reserved_port() as port:
        assert not low <= port <= high
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_an_ephemeral_range_that_leaves_no_port_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (random.randrange's own "empty range in randrange(0, 0)" before r32b)
    monkeypatch.setattr(ports, "_ephemeral", lambda: (1024, 65535))
    with pytest.raises(RuntimeError, match=r"no port to reserve .*1024-65535"):
        with ports.reserved_port():
            pass
