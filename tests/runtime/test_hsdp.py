"""HSDP (strategies/hsdp.py): the worlds it refuses, in one line, before any
process group; and two launcher "nodes" on loopback, 2 processes each, training a
4-block model with Adam and clipping like the plain single-process run, with a
(2, 2) mesh, per-block units, full state dict keys, the unsharded originals
freed, and save_state/load_state."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from accel_migrate.cli import main
from accel_migrate.cli.app import EXIT_USAGE
from accel_migrate.runtime.config import ConfigError, RuntimeConfig, load_config
from accel_migrate.runtime.env import DistEnv
from accel_migrate.runtime.strategies import strategy_class
from accel_migrate.runtime.strategies.hsdp import HSDPStrategy, mesh_shape

SCRIPT = Path(__file__).parent / "scripts" / "hsdp.py"
LOSS = re.compile(r"^(step|again) (\d+) loss (\S+)$", re.MULTILINE)
CONFIG = RuntimeConfig(strategy="hsdp", sources=(("strategy", "--strategy"),))


def _env(world: int, local: int) -> DistEnv:
    return DistEnv(0, world, 0, local, launched=True)


def test_hsdp_is_a_strategy_of_its_own_over_fsdp(tmp_path: Path) -> None:
    assert strategy_class("hsdp") is HSDPStrategy
    config = load_config(environ={"ACCEL_MIGRATE_STRATEGY": "hsdp"}, cwd=tmp_path)
    assert config.strategy == "hsdp"
    assert mesh_shape(_env(8, 4)) == (2, 4)
    HSDPStrategy.check(_env(4, 2), CONFIG)  # two nodes of two: accepted


@pytest.mark.parametrize(
    ("world", "local", "message"),
    [
        (2, 2, r"one node of 2 process\(es\); on one node HSDP is plain FSDP: use"),
        (1, 1, "one node of 1 process"),
        (6, 4, "WORLD_SIZE=6 is not a multiple of LOCAL_WORLD_SIZE=4"),
    ],
)
def test_worlds_hsdp_cannot_shard_are_refused(
    world: int, local: int, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        HSDPStrategy.check(_env(world, local), CONFIG)
    assert "strategy 'hsdp' (from --strategy)" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_launcher_refuses_hsdp_on_one_node(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ACCEL_MIGRATE_STRATEGY", raising=False)
    (tmp_path / "train.py").write_text("import accel_migrate.runtime as accel\n")
    code = main(["launch", "--nproc", "2", "--strategy", "hsdp", "train.py"])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE
    assert err.strip().splitlines() == [
        "error: strategy 'hsdp' (from --strategy) replicates across nodes, but "
        "--nnodes is 1; on one node HSDP is plain FSDP: use --strategy fsdp "
        "(or --nnodes 2 or more)"
    ]


def _losses(text: str) -> dict[tuple[str, int], float]:
    return {(kind, int(step)): float(v) for kind, step, v in LOSS.findall(text)}


@pytest.mark.multiprocess
def test_two_loopback_nodes_train_like_the_original(
    tmp_path: Path, rendezvous_port: int
) -> None:
    port = str(rendezvous_port)
    nodes = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "accel_migrate", "launch"),
                *("--nnodes", "2", "--node-rank", str(rank), "--nproc", "2"),
                *("--master-addr", "127.0.0.1", "--master-port", port),
                *("--strategy", "hsdp", str(SCRIPT), "runtime"),
                *(str(tmp_path / "hsdp.pt"), str(tmp_path / "state")),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    # The original runs while the four workers start.
    plain = subprocess.run(
        [sys.executable, str(SCRIPT), "plain", str(tmp_path / "plain.pt")],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    outputs = [node.communicate(timeout=400) for node in nodes]
    assert all(node.returncode == 0 for node in nodes), [err for _, err in outputs]
    out = outputs[0][0]
    assert outputs[1][0] == "", "rank 0 (node 0) prints, nobody else"
    assert "units 5" in out  # four blocks and the root
    # The runtime once kept every replaced parameter alive: a whole unsharded
    # copy of the model on each rank (bench/memory.py).
    assert "original parameters freed True" in out
    assert "mesh (2, 2) ('replicate', 'shard') placements ['Replicate', 'Shard']" in out
    expected = _losses(plain.stdout)
    got = _losses(out)
    assert sorted(expected) == [("step", s) for s in range(6)]
    for (kind, step), value in got.items():
        # "again": steps 3-5 rerun after load_state of the state saved at step 2.
        assert value == pytest.approx(expected["step", step], rel=1e-5), (kind, step)
    assert sorted(got) == [*(("again", s) for s in (3, 4, 5)), *sorted(expected)]
    before = torch.load(tmp_path / "plain.pt")
    after = torch.load(tmp_path / "hsdp.pt")
    assert list(after) == list(before)
    for key, value in before.items():
        torch.testing.assert_close(after[key], value, rtol=1e-5, atol=1e-6)
