"""Slurm's variables fill the multi-node options; the user's flags win."""

from __future__ import annotations

import pytest

from accel_migrate.cli.launch_command import first_slurm_host, slurm_options

DEFAULTS = {"nnodes": "1", "node_rank": None, "rdzv_endpoint": None, "rdzv_id": None}


@pytest.mark.parametrize(
    ("nodelist", "host"),
    [
        ("node[01-04,07],gpu9", "node01"),
        ("a,b", "a"),
        ("gpu-[3,5]", "gpu-3"),
        ("single", "single"),
    ],
)
def test_first_host(nodelist: str, host: str) -> None:
    assert first_slurm_host(nodelist) == host


def test_slurm_fills_the_options() -> None:
    environ = {
        "SLURM_NNODES": "4",
        "SLURM_NODEID": "2",
        "SLURM_JOB_NODELIST": "n[10-13]",
        "SLURM_JOB_ID": "77",
    }
    options = slurm_options(dict(DEFAULTS), environ)
    assert options == {
        "nnodes": "4",
        "node_rank": 2,
        "rdzv_endpoint": "n10:29500",
        "rdzv_id": "77",
    }


def test_flags_win_and_one_node_needs_nothing() -> None:
    environ = {
        "SLURM_NNODES": "4",
        "SLURM_NODEID": "2",
        "SLURM_JOB_NODELIST": "n[10-13]",
    }
    mine = {**DEFAULTS, "nnodes": "2", "rdzv_endpoint": "h:1"}
    assert slurm_options(mine, environ) == mine
    assert slurm_options(dict(DEFAULTS), {**environ, "SLURM_NNODES": "1"}) == DEFAULTS
    assert slurm_options(dict(DEFAULTS), {}) == DEFAULTS
