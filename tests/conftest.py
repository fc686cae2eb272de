"""Shared test options. ``pytest --update-golden`` rewrites golden files instead of
comparing against them; read the diff before committing it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# One thread per process, as torchrun gives each worker: before anything imports
# torch, so that the test processes and every command they start (the originals a
# test compares with, the launcher) agree, and start from the warm interpreter.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from tests import ports, warm_python

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


def parallel_jobs() -> int:
    """How many torchrun jobs one module's pool starts at once: its share of the
    cores, plus one (a world-2 job is three processes, often waiting on each other).
    Under ``pytest -n N`` the N workers share the machine, so each pool takes 1/N."""
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    return max(2, min(4, (os.cpu_count() or 2) // workers + 1))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite fixtures/**/*.out.py and *.findings.txt from the current code",
    )


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(autouse=True)
def _own_results_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test its own results cache: no test reads another's results (or the
    user's ~/.cache). XDG_CACHE_HOME too: some tests clear ACCEL_MIGRATE_*."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    monkeypatch.setenv("ACCEL_MIGRATE_CACHE_DIR", str(folder / "accel-migrate"))


@pytest.fixture
def rendezvous_port() -> Iterator[int]:
    """A port on 127.0.0.1 for a multi-node test's rendezvous, that no other test
    on this machine is handed while this one runs (tests/ports.py)."""
    with ports.reserved_port() as port:
        yield port


@pytest.fixture(autouse=True)
def _warm_launch_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's torchrun workers start from a warm interpreter that has imported
    torch (``PYTHON_EXEC``, torchrun's own override; tests/warm_python.py), unless
    the test sets its own or ACCEL_MIGRATE_TEST_WARM=0."""
    if "PYTHON_EXEC" not in os.environ:
        warm = warm_python.environment(dict(os.environ))
        if "PYTHON_EXEC" in warm:
            monkeypatch.setenv("PYTHON_EXEC", warm["PYTHON_EXEC"])


#: The longest test files (their module fixtures run pools of torchrun jobs), in
#: the order `pytest -n N --dist loadfile` should hand them out: first, so that the
#: end of the run is short files spread over every worker, not one worker finishing
#: the soundness corpus alone.
LONG_FIRST = (
    "tests/soundness/test_soundness.py",
    "tests/parity/test_parity_realworld.py",
    "tests/parity/test_parity_ddp.py",
    "tests/parity/test_parity_precision.py",
)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the order of the files as they are

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONG_FIRST.index(path) if path in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)  # stable: each file's own order is kept
