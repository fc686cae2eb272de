"""Shared test options. ``pytest --update-golden`` rewrites golden files instead of
comparing against them; read the diff before committing it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"


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
