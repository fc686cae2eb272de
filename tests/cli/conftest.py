"""The CLI tests' working folder: ``pytestmark = pytest.mark.in_tmp(...)`` in a test
module runs each of its tests in its own empty folder (``tmp_path``), so that the
command's defaults (files found from ".", settings files, the cache) read only what
the test wrote."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "in_tmp(clear=(), cache=False): run in tmp_path; unset the environment "
        "variables named in `clear` (a name ending in '_' is a prefix); with "
        "`cache`, ACCEL_MIGRATE_CACHE_DIR is tmp_path/cache",
    )


@pytest.fixture(autouse=True)
def in_tmp(request: pytest.FixtureRequest) -> Path | None:
    """Where the test has an ``in_tmp`` mark: into ``tmp_path``, less the variables
    the mark clears (``clear=("ACCEL_MIGRATE_",)``: the tool's own settings, which
    from the shell that runs pytest would override what the test sets up; a name
    ending in "_" is a prefix, any other the whole name). ``cache=True`` for tests
    that look into the results cache (set after clearing, so it holds where
    ``ACCEL_MIGRATE_`` is cleared). Unmarked tests get nothing, not even a
    ``tmp_path``."""
    mark = request.node.get_closest_marker("in_tmp")
    if mark is None:
        return None
    tmp_path: Path = request.getfixturevalue("tmp_path")
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    monkeypatch.chdir(tmp_path)
    clear = tuple(mark.kwargs.get("clear", ()))
    prefixes = tuple(c for c in clear if c.endswith("_"))
    for name in list(os.environ):
        if name in clear or (prefixes and name.startswith(prefixes)):
            monkeypatch.delenv(name)
    if mark.kwargs.get("cache", False):
        monkeypatch.setenv("ACCEL_MIGRATE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path
