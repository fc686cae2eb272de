"""``accel-migrate env``: versions, devices and the resolved runtime configuration,
each setting with the source a launched job would name."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from accel_migrate.cli import main
from accel_migrate.cli.app import EXIT_OK, EXIT_USAGE

from .test_without_torch import WITHOUT_TORCH

pytestmark = pytest.mark.in_tmp(clear=("ACCEL_MIGRATE_",))


def test_env_prints_versions_devices_and_each_settings_source(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from importlib.metadata import version

    import torch

    (tmp_path / "pyproject.toml").write_text(
        '[tool.accel-migrate]\nprecision = "bf16"\nfsdp-wrap = "root"\n'
    )
    monkeypatch.setenv("ACCEL_MIGRATE_STRATEGY", "fsdp")
    assert main(["env"]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"- torch: {torch.__version__}\n" in out
    assert f"- libcst: {version('libcst')}\n" in out
    assert f"- python: {platform.python_version()}\n" in out
    assert f"- cuda: {torch.version.cuda or 'none'}\n" in out
    assert "- nccl: " in out
    if not torch.cuda.is_available():
        assert "- devices: cpu\n" in out
    table = f"{tmp_path.resolve() / 'pyproject.toml'} [tool.accel-migrate]"
    assert "- strategy: fsdp (ACCEL_MIGRATE_STRATEGY)\n" in out
    assert f"- precision: bf16 ({table})\n" in out
    assert f"- fsdp-wrap: root ({table})\n" in out
    assert "- batch-mode: global (default)\n" in out
    assert "- fsdp-block-classes: (none) (default)\n" in out


def test_env_json_has_the_same_facts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACCEL_MIGRATE_PRECISION", "fp16")
    assert main(["env", "--format", "json"]) == EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["versions"]["python"] == platform.python_version()
    assert set(report["versions"]) >= {"accel-migrate", "torch", "cuda", "nccl"}
    assert report["config"]["precision"] == {
        "value": "fp16",
        "source": "ACCEL_MIGRATE_PRECISION",
    }
    assert report["config"]["timeout"]["value"] == 1800.0
    assert report["config_error"] is None


def test_env_reports_a_bad_setting_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.accel-migrate]\nprecision = "fp8"\n'
    )
    assert main(["env"]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert "- torch: " in captured.out  # the versions are still there for the report
    assert "precision='fp8'" in captured.err and "is not one of" in captured.err


def test_env_works_without_torch(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.accel-migrate]\nstrategy = "ddp"\n')
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, "env"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "- torch: none\n" in result.stdout
    assert "- devices: cpu\n" in result.stdout
    assert "- strategy: ddp (" in result.stdout
