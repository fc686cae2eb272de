"""Configuration precedence: flags > environment > pyproject.toml > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from accel_migrate.runtime.config import ConfigError, config_environment, load_config


def _pyproject(folder: Path, body: str) -> None:
    (folder / "pyproject.toml").write_text(f"[tool.accel-migrate]\n{body}\n")


def test_defaults(tmp_path: Path) -> None:
    config = load_config(environ={}, cwd=tmp_path)
    assert (config.strategy, config.precision, config.batch_mode) == (
        "auto",
        "fp32",
        "global",
    )
    assert config.source_of("strategy") == "default"


def test_pyproject_is_found_upwards(tmp_path: Path) -> None:
    _pyproject(
        tmp_path, 'strategy = "fsdp"\nprecision = "bf16"\nbatch-mode = "per-device"'
    )
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    config = load_config(environ={}, cwd=nested)
    assert (config.strategy, config.precision, config.batch_mode) == (
        "fsdp",
        "bf16",
        "per-device",
    )
    assert "pyproject.toml" in config.source_of("precision")


def test_environment_beats_pyproject_and_flags_beat_both(tmp_path: Path) -> None:
    _pyproject(tmp_path, 'strategy = "fsdp"\nprecision = "bf16"')
    environ = {"ACCEL_MIGRATE_STRATEGY": "ddp", "ACCEL_MIGRATE_PRECISION": "fp16"}
    config = load_config({"precision": "fp32"}, environ=environ, cwd=tmp_path)
    assert (
        config.strategy == "ddp"
        and config.source_of("strategy") == "ACCEL_MIGRATE_STRATEGY"
    )
    assert config.precision == "fp32" and config.source_of("precision") == "--precision"


def test_bad_values_repeat_what_was_asked(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"precision='fp8' from --precision is not one of: fp32, bf16, fp16",
    ):
        load_config({"precision": "fp8"}, environ={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="ACCEL_MIGRATE_STRATEGY"):
        load_config(environ={"ACCEL_MIGRATE_STRATEGY": "zero3"}, cwd=tmp_path)
    _pyproject(tmp_path, 'batch-mode = "huge"')
    with pytest.raises(ConfigError, match=r"pyproject.toml \[tool.accel-migrate\]"):
        load_config(environ={}, cwd=tmp_path)


def test_broken_pyproject_is_reported(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.accel-migrate\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(environ={}, cwd=tmp_path)


def test_environment_round_trip(tmp_path: Path) -> None:
    config = load_config(
        {"strategy": "ddp", "precision": "bf16", "timeout": 30},
        environ={},
        cwd=tmp_path,
    )
    again = load_config(environ=config_environment(config), cwd=tmp_path)
    assert (again.strategy, again.precision, again.timeout) == ("ddp", "bf16", 30.0)


def test_the_launchers_sources_reach_its_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from accel_migrate.runtime import amp

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.accel-migrate]\nbatch-mode = "per-device"\n')
    launcher = load_config({"precision": "fp16"}, environ={}, cwd=tmp_path)
    carried = config_environment(launcher)
    process = load_config(environ=carried, cwd=tmp_path)
    # Before, every setting was said to come from the variable that carried it.
    assert process.source_of("precision") == "--precision"
    where = f"{pyproject.resolve()} [tool.accel-migrate]"
    assert process.source_of("batch_mode") == where
    assert process.source_of("strategy") == "default"
    changed = {**carried, "ACCEL_MIGRATE_PRECISION": "bf16"}  # set again by hand
    again = load_config(environ=changed, cwd=tmp_path)
    assert again.source_of("precision") == "ACCEL_MIGRATE_PRECISION"

    monkeypatch.setattr(amp, "_warned", set())
    with pytest.warns(UserWarning, match=r"this run is fp16 \(from --precision\)"):
        amp.check_script_amp(SimpleNamespace(config=process), False, "autocast")
