"""BatchNorm of the global batch (runtime/sync_batchnorm.py): against torch's own
BatchNorm on the concatenated batch at world 2 over gloo, the conversion in place,
and the opt-out's configuration and warning."""

from __future__ import annotations

import io
import pickle
import re
import subprocess
from pathlib import Path

import pytest
import torch
from torch import nn

from accel_migrate.runtime import sync_batchnorm
from accel_migrate.runtime.config import ConfigError, config_environment, load_config
from accel_migrate.runtime.sync_batchnorm import batchnorm_layers, convert
from tests import warm_python

SCRIPTS = Path(__file__).parent / "scripts"
#: A number the scripts print with ``:.3e``. Rows are read by their fixed
#: format, not by line starts and ends: one process prints every rank's rows
#: (gathered), but a line of another process's output running into one (as
#: two processes' lines did in CI, test_unused_outputs) must not hide it.
NUM = r"(-?\d\.\d{3}e[+-]\d{2}|nan|inf)"
ROW = re.compile(
    rf"case (\S+) rank (\d) out {NUM} grad_x {NUM} grad_w {NUM} running {NUM}"
)
OFFSET = re.compile(rf"case 2d-offset rank (\d) mine {NUM} torch {NUM}")


def _launch(
    script: Path, *args: str, options: tuple[str, ...] = (), fails: bool = False
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [
            *warm_python.launcher(),
            "--nproc",
            "2",
            *options,
            str(script),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=warm_python.timeout(180),
        check=False,
    )
    assert (done.returncode != 0) is fails, f"{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.multiprocess
def test_a_gradient_penalty_through_global_batchnorm_stops_loudly() -> None:
    """WGAN-GP or R1 with a BatchNorm critic: the layer's backward has no second
    derivative; the penalty's backward raises the runtime's own error on every
    process (torch's once_differentiable error named no cause and no fix)."""
    done = _launch(SCRIPTS / "penalty_through_bn.py", fails=True)
    assert "first-order step trained" in done.stdout
    assert "not reached" not in done.stdout
    errors = done.stderr.count("GradientPenaltyBatchNormError: a gradient penalty")
    assert errors == 2, done.stderr
    assert "once_differentiable" not in done.stderr


@pytest.mark.multiprocess
def test_matches_torch_batchnorm_on_the_concatenated_batch() -> None:
    out = _launch(SCRIPTS / "sync_batchnorm_check.py").stdout
    rows = ROW.findall(out)
    assert len(rows) == 2 * 10, out
    for name, rank, *errors in rows:
        tolerance = 1e-12 if name.endswith("float64") else 1e-5
        for what, error in zip(
            ("out", "grad_x", "grad_w", "running"), errors, strict=True
        ):
            assert float(error) < tolerance, f"{name} rank {rank}: {what} {error}"
    offsets = OFFSET.findall(out)
    assert len(offsets) == 2, out
    for rank, mine, theirs in offsets:
        # No cancellation: at least as close to the float64 truth as torch's own.
        assert float(mine) <= float(theirs), f"rank {rank}: {mine} vs torch {theirs}"


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.bn = nn.BatchNorm2d(2)
        self.head = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3, affine=False))


def test_conversion_keeps_objects_names_and_keys() -> None:
    net = _Net()
    bn, keys = net.bn, list(net.state_dict())
    assert convert(net) == 2
    assert net.bn is bn and isinstance(bn, nn.BatchNorm2d)
    assert type(bn).__name__ == "BatchNorm2d" and "BatchNorm2d(2" in repr(net)
    assert list(net.state_dict()) == keys
    assert convert(net) == 0, "already converted layers are left alone"
    assert batchnorm_layers(net) == []


def test_converted_model_pickles_as_torchs_own_classes() -> None:
    net = _Net()
    convert(net)
    buffer = io.BytesIO()
    torch.save(net, buffer)
    assert b"accel_migrate" not in buffer.getvalue()
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded.bn) is nn.BatchNorm2d
    assert type(pickle.loads(pickle.dumps(net.head[1]))) is nn.BatchNorm1d


def test_eval_mode_is_torchs_batchnorm_without_a_process_group() -> None:
    torch.manual_seed(0)
    plain = _Net()
    plain.bn.running_mean.uniform_()
    converted = _Net()
    converted.load_state_dict(plain.state_dict())
    convert(converted)
    plain.eval(), converted.eval()
    x = torch.randn(4, 2, 5, 5)
    assert torch.equal(plain.bn(x), converted.bn(x))


def test_a_subclass_with_its_own_forward_is_not_converted() -> None:
    class Custom(nn.BatchNorm2d):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * 2

    net = nn.Sequential(Custom(2), nn.BatchNorm2d(2))
    assert convert(net) == 1
    assert type(net[0]) is Custom


def test_a_subclass_with_its_own_forward_stops_a_global_batch_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """At more than one process it would normalise by each process's share:
    every process stops at its first train-mode forward with a clear error
    (eval mode uses the running statistics and runs), unless the user opted out
    of global-batch BatchNorm (then the warning, as before)."""
    from types import SimpleNamespace

    class Conditional(nn.BatchNorm2d):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * 2

    monkeypatch.setattr(sync_batchnorm.dist, "is_initialized", lambda: True)
    env = SimpleNamespace(distributed=True, is_main=True, world_size=2)
    runtime = SimpleNamespace(env=env, config=load_config(environ={}, cwd=tmp_path))
    net = nn.Sequential(Conditional(2), nn.BatchNorm2d(2))
    sync_batchnorm.prepare(net, runtime)
    x = torch.randn(4, 2, 3, 3)
    net.eval()
    assert net(x).shape == x.shape
    net.train()
    with pytest.raises(sync_batchnorm.UnsyncedBatchNormError, match="Conditional"):
        net(x)
    monkeypatch.setattr(sync_batchnorm, "_WARNED", False)
    off = SimpleNamespace(
        env=env,
        config=load_config({"sync_batchnorm": False}, environ={}, cwd=tmp_path),
    )
    with pytest.warns(sync_batchnorm.PerProcessBatchNormWarning):
        sync_batchnorm.prepare(nn.Sequential(Conditional(2)), off)


def test_configuration(tmp_path: Path) -> None:
    assert load_config(environ={}, cwd=tmp_path).sync_batchnorm is True
    off = load_config({"sync_batchnorm": False}, environ={}, cwd=tmp_path)
    assert off.sync_batchnorm is False
    assert off.source_of("sync_batchnorm") == "--no-sync-batchnorm"
    assert (
        load_config(environ=config_environment(off), cwd=tmp_path).sync_batchnorm
        is False
    )
    (tmp_path / "pyproject.toml").write_text(
        "[tool.accel-migrate]\nsync-batchnorm = false\n"
    )
    assert load_config(environ={}, cwd=tmp_path).sync_batchnorm is False
    environ = {"ACCEL_MIGRATE_SYNC_BATCHNORM": "true"}
    assert load_config(environ=environ, cwd=tmp_path).sync_batchnorm is True
    with pytest.raises(
        ConfigError, match="sync-batchnorm='maybe' from ACCEL_MIGRATE_SYNC_BATCHNORM"
    ):
        load_config(environ={"ACCEL_MIGRATE_SYNC_BATCHNORM": "maybe"}, cwd=tmp_path)


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "options, reason",
    [
        (
            ("--no-sync-batchnorm",),
            "sync-batchnorm off, from --no-sync-batchnorm",
        ),
        (("--batch-mode", "per-device"), "batch mode per-device"),
    ],
)
def test_per_process_statistics_are_warned_once(
    options: tuple[str, ...], reason: str, tmp_path: Path
) -> None:
    from tests.conftest import FIXTURES
    from tests.parity.harness import migrate_to

    script = migrate_to(FIXTURES / "parity" / "batchnorm_cnn.py", tmp_path)
    done = _launch(script, "--epochs", "1", options=options)
    warnings = re.findall(
        r"BatchNorm statistics are per-process \(([^)]*)\)", done.stderr
    )
    assert warnings == [reason], done.stderr


INSTANCE_ROW = re.compile(rf"case (\S+) rank (\d) out {NUM} running {NUM}")


@pytest.mark.multiprocess
def test_instancenorm_running_statistics_are_the_global_batchs() -> None:
    """StarGAN's InstanceNorm(track_running_stats=True): each process's output is
    its slice of torch's on the whole batch, and the running statistics after
    three forwards are torch's on the whole batch (they were the main process's
    share's before: the trained model evaluated otherwise)."""
    out = _launch(SCRIPTS / "sync_instancenorm_check.py").stdout
    rows = INSTANCE_ROW.findall(out)
    assert len(rows) == 2 * 6, out
    for name, rank, out_error, running in rows:
        assert float(out_error) < 1e-6, f"{name} rank {rank}: out {out_error}"
        assert float(running) < 1e-6, f"{name} rank {rank}: running {running}"


def test_instancenorm_conversion_keeps_classes_keys_and_untracked_layers() -> None:
    from accel_migrate.runtime import sync_instancenorm

    net = nn.Sequential(
        nn.Conv2d(1, 2, 3),
        nn.InstanceNorm2d(2, affine=True, track_running_stats=True),
        nn.InstanceNorm2d(2),  # no running statistics: nothing to combine
    )
    keys = list(net.state_dict())
    assert sync_instancenorm.convert(net) == 1
    assert (
        isinstance(net[1], nn.InstanceNorm2d)
        and type(net[1]).__name__ == "InstanceNorm2d"
    )
    assert type(net[2]) is nn.InstanceNorm2d
    assert list(net.state_dict()) == keys
    assert sync_instancenorm.convert(net) == 0
    loaded = pickle.loads(pickle.dumps(net))
    assert type(loaded[1]) is nn.InstanceNorm2d
    net.eval()  # eval mode: torch's own computation, no process group needed
    assert net(torch.randn(2, 1, 5, 5)).shape == (2, 2, 3, 3)
